"""Issue 50.6: text that came from a runs folder (preset names, descriptions, error messages, log
lines, a saved preset) reaches no terminal raw. A crafted run (tests/support/crafted.py: an OSC
title, a screen clear, colours, Rich markup, a bidi override, U+2028) is drawn on every screen and
table it appears on, printed by every command that names it, and shown in tmux, whose pane title
it tries to change."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

import pytest
from support.crafted import FORBIDDEN, HOSTILE, write_crafted_preset, write_crafted_run
from support.dashboard import QUICK, app_for, async_test, home_ready, select_run, settled, until
from support.paths import PACKAGE, modules

from amptui.core.fmt import shown


def raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in FORBIDDEN.findall(text)})


# Where text goes to a terminal (rich/Textual renderables, widgets, print) and the attributes that
# hold text from a runs folder or a preset: such an attribute given to such a call must go through
# core.fmt.shown (the one function that shows such text), inside the call's arguments.
SINKS = {"Text", "assemble", "append", "update", "Label", "Static", "Option", "print", "write", "add_row",
         "add_option", "Line"}
RUN_TEXT = {"preset", "description", "error", "script_line", "message", "preset_ref"}
NOT_SHOWN_HERE = {  # (file, attribute): why it needs no shown() where the scan sees it
    ("amptui/cli/abscript.py", "error"): "group.update(error=...) writes the A/B's group file, not a terminal",
    ("amptui/dashboard/runmodel.py", "message"): "kept in a list; the run screen shows it through shown()",
    ("amptui/dashboard/screens/home/launch.py", "error"): "a Notice: app.notify shows every message through shown()",
    ("amptui/dashboard/screens/keys.py", "description"): "a key binding's description: amptui's own words",
}


def unshown(source: str, name: str) -> set[tuple[str, str]]:
    """(name, attribute) of each RUN_TEXT attribute passed to a SINKS call outside a shown(...) call."""
    tree = ast.parse(source, name)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def in_shown(node: ast.AST) -> bool:
        while (node := parents.get(node)) is not None:
            if isinstance(node, ast.Call) and "shown" in (getattr(node.func, "id", None), getattr(node.func, "attr", None)):
                return True
        return False

    found = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and (getattr(call.func, "id", None) or getattr(call.func, "attr", None)) in SINKS:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                found |= {(name, sub.attr) for sub in ast.walk(arg)
                          if isinstance(sub, ast.Attribute) and sub.attr in RUN_TEXT and not in_shown(sub)}
    return found


def test_text_from_a_runs_folder_reaches_widgets_and_print_only_through_shown():
    """The scan for shown text (issue 50): the home screen's `Text(shown(r.script_line) or r.preset)`
    passed a crafted preset name raw; a call like it anywhere in the dashboard or the CLI fails here."""
    files = [*modules(PACKAGE / "dashboard"), *modules(PACKAGE / "cli")]
    found = set().union(*(unshown(p.read_text(), str(p.relative_to(PACKAGE.parent))) for p in files))
    assert found - NOT_SHOWN_HERE.keys() == set(), "show runs-folder text through core.fmt.shown"
    old_leak = 'text = Text(shown(r.script_line) or r.preset or "-")'
    assert unshown(old_leak, "runtable.py") == {("runtable.py", "preset")}  # the scan sees the leak it was for
    assert unshown(old_leak.replace(') or r.preset or "-")', ' or r.preset or "-"))'), "runtable.py") == set()


def test_shown_escapes_every_control_bidi_and_line_separator_and_keeps_the_rest():
    text = shown(HOSTILE, markup=True)
    assert raw_controls(text) == []
    assert "\\x1b]2;PWNED-TITLE\\x07" in text and "\\u202e" in text and "\\u2028" in text and "\\u009b" in text
    assert "\\[bold red]boom\\[/]" in text  # Rich reads it back as the literal text
    assert shown("café → 日本 ✓") == "café → 日本 ✓"


@pytest.fixture
def crafted(root, tmp_path):
    """The canned runs plus the crafted run, and the crafted saved preset."""
    write_crafted_preset(tmp_path / "config")
    return write_crafted_run(root)


def screen_text(app) -> str:
    """What the screen draws now, as the SVG the export writes (every cell's character)."""
    return app.export_screenshot()


def crafted_plan() -> dict:
    """A run's plan.json whose preset, layer names, choices and reasons are hostile."""
    layer = {"name": HOSTILE, "shape": {"m": 64, "k": 64, "n": 64}, "flops_share": 1.0, "choice": HOSTILE,
             "reason": HOSTILE, "recipes": {"bf16": {"sqnr_db": 50.0}}}
    return {"run_id": HOSTILE, "preset": HOSTILE, "device": {"name": HOSTILE}, "samples": 4, "layers": [layer],
            "predicted_speedup": 1.1, "risk": {"lowest_sqnr_db": 20.0, "layer": HOSTILE}, "float8_layers": 0}


def crafted_tune(root: Path) -> Path:
    """A tune's result file whose preset and device name are hostile."""
    import json

    from support.tune import finished_search, write_tune

    path = write_tune(root, finished_search(), interrupted=False)
    result = json.loads(path.read_text())
    path.write_text(json.dumps({**result, "preset": HOSTILE, "device_name": HOSTILE}))
    return path


@async_test
async def test_a_crafted_run_draws_no_control_character_on_any_screen(root, crafted):
    from amptui.dashboard.screens.compare.screen import CompareScreen
    from amptui.dashboard.screens.home.presets import PresetList
    from amptui.dashboard.screens.modals import RunInfoModal
    from amptui.dashboard.screens.plan.screen import PlanScreen
    from amptui.dashboard.screens.run.screen import RunScreen
    from amptui.dashboard.screens.tune.screen import TuneScreen

    app = app_for(root)
    seen = {}
    async with app.run_test(size=(160, 50)) as pilot:
        await home_ready(pilot, 4)
        await select_run(pilot, crafted.name)
        await settled(pilot)
        seen["home (runs table)"] = screen_text(app)
        presets = app.screen.query_one(PresetList)
        ids = [presets.get_option_at_index(i).id for i in range(presets.option_count)]
        presets.highlighted = ids.index("shared")
        await settled(pilot)
        seen["home (saved preset)"] = screen_text(app)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, RunInfoModal))
        await settled(pilot)
        seen["run info"] = screen_text(app)
        await pilot.press("escape")
        await settled(pilot)
        app.open_compare([root / QUICK, crafted])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        await settled(pilot)
        seen["compare"] = screen_text(app)
        app.pop_screen()
        await settled(pilot)
        app.open_run(crafted)
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.drawn())
        await settled(pilot)
        seen["run"] = screen_text(app)
        app.push_screen(PlanScreen(crafted_plan()))  # a plan.json of the run: names from a user's model
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        await settled(pilot)
        seen["plan"] = screen_text(app)
        app.push_screen(TuneScreen(crafted_tune(root), None, HOSTILE))  # a tune's result file
        await until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.result is not None)
        await settled(pilot)
        seen["tune"] = screen_text(app)
    assert all("evil" in seen[where] for where in ("home (runs table)", "compare", "run info", "plan", "tune"))
    leaks = {where: raw_controls(text) for where, text in seen.items() if raw_controls(text)}
    assert leaks == {}, leaks
    assert "[bold&#160;red]boom[/]" in seen["run info"]  # markup shown as written, never applied


def cli_out(cli, *args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_every_command_that_names_a_crafted_run_prints_no_control_character(cli, root, crafted):
    runs = ("--runs-dir", str(root))
    outputs = {" ".join(args): cli_out(cli, *args, *runs) for args in (
        ("runs",), ("compare", QUICK, crafted.name), ("compare", QUICK, crafted.name, "--format", "markdown"),
        ("compare", QUICK, crafted.name, "--format", "csv"), ("compare", QUICK, crafted.name, "--format", "json"),
        ("export", crafted.name))}
    outputs["presets show shared"] = cli_out(cli, "presets", "show", "shared")
    outputs["presets list"] = cli_out(cli, "presets", "list")
    # (CSV ends its lines with \r\n, the format's own)
    leaks = {command: raw_controls(text.replace("\r\n", "\n")) for command, text in outputs.items()
             if raw_controls(text.replace("\r\n", "\n"))}
    assert leaks == {}, leaks
    table = cli("compare", QUICK, crafted.name, "--format", "csv", *runs).stdout
    rows = list(csv.DictReader(io.StringIO(table)))  # still one row per run, its text as shown
    assert [r["preset"] for r in rows] == ["quickstart", shown(HOSTILE)]


MARKUP = "[/]evil [bold]x"  # a closing tag with nothing to close: Rich refuses to read it (MarkupError)


def plain(svg: str) -> str:
    """The characters an SVG screenshot draws, as text (tags out, entities and no-break spaces read)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


@async_test
async def test_markup_in_a_crafted_run_or_plan_is_drawn_as_written_in_the_compare_and_plan_tables(root):
    """A DataTable reads a plain str cell as Rich markup: a preset or layer name that is a tag styled
    the table, and an unbalanced one (`[/]`) ended the dashboard."""
    from amptui.dashboard.screens.compare.screen import CompareScreen
    from amptui.dashboard.screens.plan.screen import PlanScreen

    crafted = write_crafted_run(root, hostile=MARKUP)
    layer = {"name": MARKUP, "shape": {"m": 64, "k": 64, "n": 64}, "flops_share": 1.0, "choice": MARKUP,
             "reason": "r", "recipes": {"bf16": {"sqnr_db": 50.0}}}
    app = app_for(root)
    seen = {}
    async with app.run_test(size=(200, 50)) as pilot:
        await home_ready(pilot, 4)
        app.open_compare([root / QUICK, crafted])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        await settled(pilot)
        seen["compare"] = plain(screen_text(app))
        app.pop_screen()
        await settled(pilot)
        app.push_screen(PlanScreen({"preset": "p", "device": {"name": "d"}, "samples": 4, "layers": [layer]}))
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        await settled(pilot)
        seen["plan"] = plain(screen_text(app))
    assert {where: MARKUP in text for where, text in seen.items()} == {"compare": True, "plan": True}
