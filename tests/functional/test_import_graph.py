"""No import circles: no two amptui modules import each other, counting the imports made inside
functions (a lazy import hides a circle from the interpreter, not from the reader) and those under
`if TYPE_CHECKING:` (they never run, but a reader still has to hold both modules at once: a part is
typed by a protocol of what it reads instead, as trainer/host.py and scripthooks/host.py do). Around a
longer loop, imports that run count. grimp (installed with import-linter) builds the graph in
process, in well under a second."""

from __future__ import annotations

import grimp
from support.import_graph import _circles


def test_the_check_sees_a_circle_made_by_an_import_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("def later():\n    from circled import c\n")
    (package / "c.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from circled import b\n"
                                  "def later():\n    from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circled", exclude_type_checking_imports=True, cache_dir=None)
    assert _circles(graph) == [["circled.a", "circled.b", "circled.c"]]
