"""Adding a run-screen panel is one file (docs/development.md, "Adding a panel"): the example panel
there, written as it stands into the panels package, is numbered, gets its key, its tab, its keymap
name and its help line, and draws, with no other file changed (issue 42).

The run screen reads the panel registry when it is imported, so the new file is added in a fresh
interpreter, before anything imports the dashboard: one more folder on the panels package's
`__path__`, which `registry()` walks as it walks the package's own folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
from support.dashboard import SCALER, copy_runs
from support.paths import REPO

pytestmark = pytest.mark.slow  # a fresh interpreter: the registry is read once per process

PILOT = textwrap.dedent('''
    import asyncio, json, sys
    sys.path.insert(0, sys.argv[4])  # tests/: support.dashboard's waits
    import amptui.dashboard.panels as panels
    from support.dashboard import until
    panels.__path__.append(sys.argv[1])  # the one new file, beside the package's own

    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.help import key_rows
    from amptui.dashboard.screens.run.screen import NUMBERED, PANELS, RunScreen

    async def main():
        app = make_app(sys.argv[2], watch=sys.argv[3])
        async with app.run_test(size=(160, 50)) as pilot:
            screen = app.screen
            # the run read and every panel drawn
            await until(pilot, lambda: isinstance(screen, RunScreen) and not screen.model.loading and screen.drawn(), 60)
            index = next(i for i, cls in enumerate(NUMBERED) if cls.KEY == "steptime")
            panel = screen.numbered(index)
            await pilot.press(str(index + 1))
            await until(pilot, lambda: screen.maximized is panel, 10)
            print(json.dumps({
                "numbered": [cls.NAME for cls in NUMBERED], "tabs": [cls.NAME for cls in PANELS],
                "title": str(panel.border_title), "subtitle": str(panel.border_subtitle),
                "bindings": [b.id for b in RunScreen.BINDINGS if b.key == str(index + 1)],
                "maximized": screen.maximized is panel,
                "tab_line": str(screen.query_one("#panel-tabs").render()),
                "help": [" ".join(map(str, row)) for row in key_rows(screen)],
            }))

    asyncio.run(main())
''')


def docs_panel_example() -> str:
    text = (REPO / "docs" / "development.md").read_text()
    section = text[text.index("## Adding a panel"):text.index("## Adding a command")]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_docs_example_panel_is_one_file_and_shows_on_the_run_screen(tmp_path):
    extra = tmp_path / "more_panels"
    extra.mkdir()
    (extra / "steptime.py").write_text(docs_panel_example())
    runs = copy_runs(tmp_path / "runs")
    proc = subprocess.run([sys.executable, "-c", PILOT, str(extra), str(runs), str(runs / SCALER), str(REPO / "tests")],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    # numbered after throughput (PLACE 5.5), before the output log; always shown, so a tab too
    assert shown["numbered"][4:7] == ["throughput", "step time", "log"], shown["numbered"]
    assert "step time" in shown["tabs"] and " 6 step time " in shown["tab_line"]
    assert shown["title"] == "6 step time (ms)"
    assert shown["bindings"] == ["run.panel_step_time"]
    assert shown["maximized"]  # its number key shows it
    assert any("panel: step time" in row for row in shown["help"]), shown["help"]
    assert shown["subtitle"].endswith(" ms")  # drawn from the run's records
