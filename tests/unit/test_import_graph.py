"""No import circles: no two amptui modules import each other, counting the imports made inside
functions (a lazy import hides a circle from the interpreter, not from the reader) and those under
`if TYPE_CHECKING:` (they never run, but a reader still has to hold both modules at once: a part is
typed by a protocol of what it reads instead, as trainer/host.py and scripthooks/host.py do). Around a
longer loop, imports that run count. grimp (installed with import-linter) builds the graph in
process, in well under a second."""

from __future__ import annotations

import grimp
from support.import_graph import _circles


def _graph(type_checking: bool = False) -> grimp.ImportGraph:
    """amptui's import graph; `type_checking`: with the imports made only for type checking."""
    return grimp.build_graph("amptui", exclude_type_checking_imports=not type_checking, cache_dir=None)


def _where(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    lines = graph.get_import_details(importer=importer, imported=imported)
    return ", ".join(f"{d['importer']}:{d['line_number']} {d['line_contents']!r}" for d in lines) or "?"


def test_no_two_modules_import_each_other_even_for_types():
    graph = _graph(type_checking=True)
    pairs = [(a, b) for a in sorted(graph.modules) for b in sorted(graph.find_modules_directly_imported_by(a))
             if a < b and a in graph.find_modules_directly_imported_by(b)]
    said = [f"{a} <-> {b}: {_where(graph, a, b)}; {_where(graph, b, a)}" for a, b in pairs]
    assert not said, "modules that import each other:\n" + "\n".join(said)


def test_no_longer_import_circles():
    graph = _graph()
    circles = _circles(graph)
    said = []
    for group in circles:
        inside = set(group)
        said.append(" / ".join(group) + ":\n" + "\n".join(
            f"  {_where(graph, a, b)}" for a in group for b in sorted(graph.find_modules_directly_imported_by(a))
            if b in inside))
    assert not said, "modules that import each other around a circle:\n" + "\n".join(said)


def test_no_screen_or_widget_imports_the_app_even_for_its_types():
    """The screens reach the app through dashboard/shell.py's protocol (issue 42): app.py imports the
    screens, and an import back, even one under TYPE_CHECKING, made a circle of eleven files."""
    graph = grimp.build_graph("amptui", exclude_type_checking_imports=False, cache_dir=None)
    importers = sorted(graph.find_modules_that_directly_import("amptui.dashboard.app"))
    inside = [m for m in importers if m.startswith("amptui.dashboard.")]
    assert not inside, "dashboard modules that import app.py: " + ", ".join(
        _where(graph, m, "amptui.dashboard.app") for m in inside)
    circles = [group for group in _circles(graph) if any(m.startswith("amptui.dashboard") for m in group)]
    assert not circles, "dashboard modules around a circle (type-checking imports counted): " + repr(circles)
