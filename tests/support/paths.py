"""The repository, its package, and the canned runs, presets and event files under tests/fixtures, and the
training scripts under tests/scripts: named here so a test finds them wherever its tier's folder is.
The package is found through `amptui.__file__` (the installed, editable checkout), never through a test
file's own place; `modules()` refuses to hand a scan test an empty list (a wrong path must not pass)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import amptui

PACKAGE = Path(amptui.__file__).resolve().parent
REPO = PACKAGE.parent
FIXTURES = REPO / "tests" / "fixtures"
SCRIPTS = REPO / "tests" / "scripts"
BENCHMARKS = REPO / "benchmarks"
FEWEST_MODULES = 100  # amptui has ~250: fewer means the scan looked in the wrong place


def modules(package: Path = PACKAGE) -> list[Path]:
    """Every .py file under `package`, sorted; fails when it finds (next to) none."""
    found = sorted(package.rglob("*.py"))
    least = FEWEST_MODULES if package == PACKAGE else 1
    assert len(found) >= least, f"only {len(found)} Python files under {package}: the scan would check nothing"
    return found


@functools.cache
def parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree, parsed once a session (the scan tests walk the same ~250 modules; read only)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))
