"""Modules a reader can hold in mind (issue 52): no amptui module over 400 lines (the developers'
guide asks for about 350), and core grouped by subject: at most 20 modules loose in amptui/core,
the rest in its subject packages (config/, run/, stream/, comparison/, planning/, ...). Read from
the files, so it is fast and imports nothing but amptui's package (to find it)."""

from __future__ import annotations

from pathlib import Path

import amptui

PACKAGE = Path(amptui.__file__).resolve().parent  # wherever this test file moves to
MOST_LINES = 400
MOST_LOOSE_IN_CORE = 20


def test_no_module_is_over_400_lines():
    sizes = {path.relative_to(PACKAGE.parent): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100, f"amptui's modules not found under {PACKAGE}"
    over = sorted((n, str(p)) for p, n in sizes.items() if n > MOST_LINES)
    assert not over, f"modules over {MOST_LINES} lines (split them by subject): " + ", ".join(
        f"{p} ({n})" for n, p in over)


def test_core_holds_at_most_20_loose_modules():
    loose = sorted(p.name for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MOST_LOOSE_IN_CORE, (
        f"{len(loose)} modules loose in amptui/core (at most {MOST_LOOSE_IN_CORE}: put a new one in its "
        f"subject's package): " + ", ".join(loose))

