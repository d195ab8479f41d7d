"""The tiers are folders and markers at once: every test in tests/process is marked `slow` (it starts a
process), none in tests/unit or tests/functional is, and no test file lives outside the three folders, so
`pytest tests/unit tests/functional` and `pytest -m "not slow"` run the same tests (docs/testing.md)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO

TESTS = REPO / "tests"
TIERS = ("unit", "functional", "process")


def marks(nodes) -> set[str]:
    """The `pytest.mark.NAME`s named in these decorators (or a `pytestmark` value)."""
    return {node.attr for dec in nodes for node in ast.walk(dec)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark"}


def marks_as_written(path: Path):
    """(test name, its marks and its module's) for each test function of a file, as written."""
    tree = ast.parse(path.read_text())
    module = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module |= marks([node.value])
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node.name, module | marks(node.decorator_list)


def tier_of(path: Path) -> str | None:
    parts = Path(path).resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def test_each_tiers_tests_are_slow_exactly_in_the_process_folder():
    wrong = [f"{path.relative_to(TESTS)}::{name} ({'not ' * ('slow' not in found)}marked slow)"
             for tier in TIERS for path in sorted((TESTS / tier).glob("test_*.py"))
             for name, found in marks_as_written(path) if ("slow" in found) != (tier == "process")]
    assert not wrong, "move these (a test that starts a process is slow and lives in tests/process):\n" + "\n".join(wrong)


def test_no_test_file_lives_outside_the_three_tiers():
    stray = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
             if p.relative_to(TESTS).parts[0] not in (*TIERS, "fixtures", "scripts")]
    assert not stray, f"put these in tests/unit, tests/functional or tests/process: {stray}"


def test_the_tests_collected_now_agree_with_their_folder(request):
    """Markers from any source (a pytestmark list, a parameter's marks, a hook), for what this session
    collected."""
    wrong = [item.nodeid for item in request.session.items
             if tier_of(item.path) and (item.get_closest_marker("slow") is not None) != (tier_of(item.path) == "process")]
    assert not wrong, wrong
