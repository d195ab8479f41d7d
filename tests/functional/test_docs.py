"""The docs name only what exists: every `amptui/...` path, `amptui.x.y` module and UPPER_CASE
constant written in backticks in README.md and docs/*.md is in the code (fast, no processes)."""

from __future__ import annotations

import re

from support.paths import PACKAGE, REPO, modules

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(?<![\w./-])(amptui/[\w./-]*\w)")
MODULE = re.compile(r"(?<![\w./-])(amptui(?:\.\w+)+)")
CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def spans() -> list[tuple[str, str]]:
    """(doc name, text) of every backticked span, fenced code blocks included."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        found += [(doc.name, m.group(1)) for m in SPAN.finditer(text)]
        found += [(doc.name, line) for block in re.findall(r"```.*?\n(.*?)```", text, re.S)
                  for line in block.splitlines()]
    return found


def code_text() -> str:
    return "\n".join(p.read_text() for p in modules())


def test_every_amptui_path_a_doc_names_exists():
    missing = {(doc, path) for doc, span in spans() for path in PATH.findall(span)
               if not (REPO / path.rstrip("/")).exists()}
    assert not missing, sorted(missing)


FILE_SUFFIXES = {"py", "toml", "tcss", "json", "md"}


def _resolves(dotted: str) -> bool:
    """A module or package, a name defined in one (`amptui.core.inputbound.INPUT_BOUND_SHARE`,
    `amptui.Monitor`), or a file in the package (`amptui.tcss`)."""
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return any(PACKAGE.rglob(dotted))
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and re.search(rf"\b{re.escape(rest[0])}\b", source.read_text()) is not None)
    return False


def test_every_amptui_module_a_doc_names_exists():
    missing = {(doc, mod) for doc, span in spans() for mod in MODULE.findall(span) if not _resolves(mod)}
    assert not missing, sorted(missing)


def test_every_constant_a_doc_names_is_in_the_code():
    code = code_text()
    named = {(doc, span) for doc, span in spans() if CONSTANT.fullmatch(span)}
    missing = {(doc, name) for doc, name in named if not re.search(rf"\b{name}\b", code)}
    assert named and not missing, sorted(missing)
