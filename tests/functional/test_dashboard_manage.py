"""Pilot tests for issue 13's dashboard points: keys only where they apply, help, resume, delete,
filter, run info, the runs folder as a file, DataParallel marked at once, edits kept per preset,
text fields and focus, short run ids, wrapped alarms and log, compare preset/warning/export."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

from support.dashboard import (
    FAILED,
    FROZEN_NOW,
    LIVE,
    QUICK,
    SCALER,
    Notes,
    app_for,
    async_test,
    copy_runs,
    home_ready,
    select_run,
    settled,
    until,
)
from support.records import record

from amptui.core.config import presets as presetmod
from amptui.core.stream.records import WarningRecord
from amptui.dashboard.runscache import RunsCache
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.help import HelpScreen
from amptui.dashboard.screens.home import runs as home_runs
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.modals import ConfirmModal, RunInfoModal
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.runtable import RunTable, short_ids
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs.spawn import amptui_python

STOPPED = "20261121-231700-quickstart-stop"
SCRIPT = "20261121-231800-train-5c21"


def add_stopped_run(root: Path, name: str = STOPPED, script: bool = False) -> Path:
    """The failed fixture turned into a stopped run with a checkpoint (or a --script run)."""
    path = root / name
    shutil.copytree(root / FAILED, path)
    lines = [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]
    for rec in lines:
        if rec.get("kind") == "end":
            rec["status"], rec["error"] = "stopped", None
    (path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "last.pt").write_bytes(b"not read by the dashboard")
    if script:
        text = (path / "config.toml").read_text().replace("[run]\n", '[run]\nscript = "train.py"\n', 1)
        (path / "config.toml").write_text(text)
    return path


def shown_keys(app) -> set[str]:
    return {b.binding.key for b in app.active_bindings.values() if b.binding.show}


def fake_amptui(monkeypatch, calls, stdout="", returncode=0, stderr=""):
    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, returncode, stdout=stdout, stderr=stderr)

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_run)


# --- keys where they apply, resume -------------------------------------------------------------------

@async_test
async def test_stopped_run_offers_resume_not_stop_and_R_resumes_it(root, monkeypatch):
    add_stopped_run(root)
    calls = []
    fake_amptui(monkeypatch, calls, stdout=json.dumps({"kind": "resume", "run_id": STOPPED}) + "\n")
    app = app_for(root, watch=root / STOPPED)
    async with app.run_test(size=(110, 34)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.model.status == "stopped" and not screen.model.loading)
        await until(pilot, lambda: "R" in shown_keys(app))
        assert "s" not in shown_keys(app)
        assert "R continues it" in str(screen.query_one("#error-panel").render())
        await pilot.press("R")
        await until(pilot, lambda: calls)
        assert calls[0][:4] == [*amptui_python(), "-m", "amptui"]  # never an amptui/ in the working folder
        assert calls[0][4:7] == ["resume", STOPPED, "--detach"]


@async_test
async def test_resume_refused_with_the_reason_and_never_suggested_for_a_script_run(root, monkeypatch):
    add_stopped_run(root, SCRIPT, script=True)
    calls = []
    fake_amptui(monkeypatch, calls)
    app = app_for(root, watch=root / SCRIPT)
    async with app.run_test(size=(110, 34)) as pilot:
        screen = app.screen
        notes = Notes().install(app)
        await until(pilot, lambda: screen.model.status == "stopped" and not screen.model.loading)
        await until(pilot, screen.drawn)  # the screen renders the model on a timer
        await settled(pilot)
        assert not {"s", "R"} & shown_keys(app)
        panel = str(screen.query_one("#error-panel").render())
        assert "amptui resume" not in panel and "your own script" in panel
        await pilot.press("R")  # not offered, but pressing it says why
        await until(pilot, lambda: notes)
        assert "your own script" in notes.text() and not calls


@async_test
async def test_home_R_resumes_the_highlighted_run_or_says_why_not(root, monkeypatch):
    add_stopped_run(root)
    calls = []
    fake_amptui(monkeypatch, calls, stdout=json.dumps({"kind": "resume", "run_id": STOPPED}) + "\n")
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot, 4)
        notes = Notes().install(app)
        await select_run(pilot, QUICK)
        assert "R" not in shown_keys(app)
        await pilot.press("R")
        await until(pilot, lambda: notes)
        assert "has completed" in notes.text() and not calls
        await select_run(pilot, STOPPED)
        assert "R" in shown_keys(app)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        assert calls[0][4:7] == ["resume", STOPPED, "--detach"]


# --- help ------------------------------------------------------------------------------------------------

@async_test
async def test_question_mark_and_f1_list_every_key_of_the_screen(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(" ".join(row) for row in app.screen.rows)
        for binding in HomeScreen.BINDINGS:
            if not binding.action.startswith("why_not"):
                assert binding.description in text
        assert "space" in text and "Help" in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)
        await select_run(pilot, SCALER)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(" ".join(row) for row in app.screen.rows)
        assert "Stop the run is not running" in text and "Detach" in text and "panel: memory" in text
        await pilot.press("escape")
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert "Keys of this screen" in commands


# --- runs: delete, filter, info, short ids -------------------------------------------------------------

@async_test
async def test_x_deletes_after_asking_and_refuses_a_running_run(root):
    copy_runs(root, live=True)
    app = app_for(root, process_alive=lambda info: True)  # the live fixture's trainer is "alive"
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot, 4)
        notes = Notes().install(app)
        await select_run(pilot, LIVE)
        await pilot.press("x")
        await until(pilot, lambda: notes)
        assert "stop it before deleting" in notes.text() and (root / LIVE).is_dir()
        await select_run(pilot, FAILED)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("n")
        await pilot.pause()
        assert (root / FAILED).is_dir()
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await until(pilot, lambda: not (root / FAILED).exists())
        await until(pilot, lambda: FAILED not in app.screen.query_one(RunTable).run_ids)


@async_test
async def test_f_filters_runs_by_preset_and_status(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        await pilot.press("f")
        await pilot.press(*"failed")
        await until(pilot, lambda: table.run_ids == [FAILED])
        await pilot.press("escape")
        assert app.focused is table and home.query_one("#runs-filter").display
        assert "1 of 3" in str(home.query_one("#runs-box").border_title)
        await pilot.press("f", "ctrl+u", *"scaler-lab")
        await until(pilot, lambda: table.run_ids == [SCALER])
        await pilot.press("ctrl+u", "enter")
        await until(pilot, lambda: len(table.run_ids) == 3)
        assert not home.query_one("#runs-filter").display


@async_test
async def test_a_filter_shows_as_it_is_typed_and_reads_no_file(root, monkeypatch):
    """Each key of `/` filters the runs and presets last read, at once: no run folder and no preset
    file is read again (a folder of hundreds of runs was read whole on every key)."""
    monkeypatch.setattr(home_runs, "RUNS_REFRESH_S", 3600)  # no periodic read in this test
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        await settled(pilot)
        reads = []
        scan, list_presets = RunsCache.scan, presetmod.list_presets
        monkeypatch.setattr(RunsCache, "scan", lambda cache, folder: reads.append(folder) or scan(cache, folder))
        monkeypatch.setattr(presetmod, "list_presets", lambda: reads.append("presets") or list_presets())
        for typed, runs in (("fai", [FAILED]), ("sca", [SCALER]), ("zz", [])):
            await pilot.press("slash", "ctrl+u", *typed)
            assert table.run_ids == runs, typed  # once the keys are handled: no read to wait for
        await pilot.press("ctrl+u")
        assert len(table.run_ids) == 3 and "quickstart" in [str(o.id) for o in home.query_one("#presets").options]
        await settled(pilot)
        assert reads == []


@async_test
async def test_a_filter_typed_fast_past_its_last_match_shows_no_preset(root):
    """Keys faster than the screen: the highlight that "cifar" gave the list arrives after "cifarzz" has
    emptied it, and must not bring that preset's toggles back."""
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        await pilot.press("slash")
        box = home.query_one("#runs-filter")
        box.value = "cifar"
        box.value = "cifarzz"
        await settled(pilot)
        assert home.query_one("#presets").option_count == 0
        assert home.preset is None and "cifarzz" in str(home.query_one("#preset-desc").render())


@async_test
async def test_a_refresh_asked_while_the_run_list_is_read_reads_it_again_after(root, monkeypatch):
    """A run deleted while the list is being read (that read saw it) is gone once the read ends, not
    at the next periodic read (2 s; never, in this test)."""
    monkeypatch.setattr(home_runs, "RUNS_REFRESH_S", 3600)
    gate, reads = threading.Event(), []
    scan = RunsCache.scan

    def held_scan(cache, folder):
        found = scan(cache, folder)
        reads.append(folder)
        if len(reads) == 2:
            gate.wait(30)  # the second read holds what it saw
        return found

    monkeypatch.setattr(RunsCache, "scan", held_scan)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        pane = home.query_one(home_runs.RunsPane)
        pane.refresh_runs()
        await until(pilot, lambda: len(reads) == 2)
        shutil.rmtree(root / FAILED)
        pane.refresh_runs()  # asked while the second read is going
        gate.set()
        await until(pilot, lambda: len(reads) == 3 and FAILED not in table.run_ids)
        assert sorted(table.run_ids) == sorted([QUICK, SCALER])


@async_test
async def test_i_shows_the_config_and_the_equivalent_command(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot, 3)
        await select_run(pilot, SCALER)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, RunInfoModal))
        command = str(app.screen.query_one("#info-command").render())
        assert command.startswith("amptui run scaler-lab")
        assert "[amp]" in (root / SCALER / "config.toml").read_text()
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))


def test_equivalent_command_reproduces_the_config(root):
    """The command line `i` shows, run through the CLI's own parsing, gives the run's config back."""
    import shlex

    from amptui.core.config import presets as presetmod
    from amptui.core.config import values as cfgmod
    from amptui.core.run import runops
    from amptui.core.run.runfiles import RunFolder

    words = shlex.split(runops.equivalent_command(root / QUICK))
    assert words[:3] == ["amptui", "run", "quickstart"]
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    rebuilt = presetmod.find_preset("quickstart").config(cfgmod.parse_set(sets))
    assert rebuilt == RunFolder(root / QUICK).load_config()


def test_short_ids_tell_runs_apart():
    ids = ["20261122-160001-quickstart-8ab8", "20261122-160002-quickstart-8ab9", "x-8ab8"]
    short = short_ids(ids)
    assert short["20261122-160002-quickstart-8ab9"] == "8ab9"
    assert len(set(short.values())) == 3


@async_test
async def test_run_ids_are_told_apart_at_80x24(root):
    for i in range(3):  # ids that share everything up to the random suffix, as runs started together
        shutil.copytree(root / QUICK, root / f"20261121-231544-quickstart-8ab{i}")
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        home = await home_ready(pilot, 6)
        await settled(pilot)
        table = home.query_one(RunTable)
        shown = [str(table.get_row(rid)[1]) for rid in table.run_ids]
        assert len(set(shown)) == len(shown)
        # the id is the second column: on screen at 80 columns, whatever else is cut
        assert sum(c.get_render_width(table) for c in list(table.columns.values())[:2]) < 20


# --- toggles ----------------------------------------------------------------------------------------------

@async_test
async def test_parallel_dp_is_marked_invalid_at_once_on_the_cpu(root, monkeypatch):
    calls = []
    fake_amptui(monkeypatch, calls)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        home.query_one("#t-run-device").value = "cpu"
        home.query_one("#t-dist-mode").value = "dp"
        await pilot.pause()
        assert "needs at least 2 GPUs" in str(home.query_one("#toggle-error").render())
        assert home.query_one("#t-dist-mode").has_class("-invalid")
        home.query_one("#presets").focus()
        await pilot.press("r")
        await pilot.pause()
        assert not calls and "2 GPUs" in notes.text()
        home.query_one("#t-dist-mode").value = "none"
        await pilot.pause()
        assert not home.query_one("#t-dist-mode").has_class("-invalid")


@async_test
async def test_edited_toggles_are_kept_when_the_highlight_moves(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        home.query_one("#t-data-batch-size").value = "16"
        await pilot.pause()
        home.query_one("#presets").focus()
        await pilot.press("down")
        await until(pilot, lambda: home.preset.name != "quickstart")
        assert home.query_one("#t-data-batch-size").value != "16"
        await pilot.press("up")
        await until(pilot, lambda: home.preset.name == "quickstart")
        await pilot.pause()
        assert home.query_one("#t-data-batch-size").value == "16"
        assert "your edits" in str(home.query_one("#preset-desc").render())


@async_test
async def test_an_invalid_preset_shows_no_borrowed_values(root, tmp_path, monkeypatch):
    saved = tmp_path / "config" / "amptui" / "presets"
    saved.mkdir(parents=True)
    (saved / "broken.toml").write_text("[amp]\ndtype = 'float8'\n")
    calls = []
    fake_amptui(monkeypatch, calls)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        names = [p.name for p in home.presets]
        home.query_one("#presets").highlighted = names.index("broken")
        await until(pilot, lambda: home.preset.name == "broken")
        await pilot.pause()
        toggles = home.query_one(TogglesPanel)
        grid = toggles.query_one("#toggle-grid")
        assert grid.disabled and not grid.display
        assert "cannot load" in str(toggles.query_one("#toggle-error").render())
        assert toggles.query_one("#t-data-batch-size").value == "" and toggles.query_one("#t-optim-lr").value == ""
        notes = Notes().install(app)
        await pilot.press("r")
        await pilot.pause()
        assert not calls and "cannot load" in notes.text()


@async_test
async def test_text_field_keys_escape_and_shift_tab(root, monkeypatch):
    calls = []
    fake_amptui(monkeypatch, calls, returncode=2, stderr="amptui: error: nope\n")
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        box = home.query_one("#t-run-max-steps")
        box.focus()
        await pilot.pause()
        footer = {b.binding.description for b in app.active_bindings.values() if b.binding.show}
        assert any("Leave field" in d for d in footer) and "Help" in footer  # the footer is not blank
        await pilot.press("ctrl+u", "1", "r")
        assert box.value == "1r" and not calls  # r types in a text field...
        await pilot.press("backspace", "escape")
        assert app.focused is home.query_one("#presets")
        await pilot.press("r")  # ...and runs from the lists
        await until(pilot, lambda: calls)
        await pilot.press("shift+tab")
        assert app.focused is box  # back to the widget before Presets, not down to Runs


@async_test
async def test_open_drop_down_has_a_border_and_its_own_background(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        select = home.query_one("#t-amp-grad-scaler")
        select.focus()
        await pilot.press("enter")
        await pilot.pause()
        overlay = select.query_one("SelectOverlay")
        assert select.expanded and overlay.styles.border_top[0] != ""
        assert overlay.styles.background != home.query_one(TogglesPanel).styles.background


# --- runs folder, A/B ----------------------------------------------------------------------------------

@async_test
async def test_runs_folder_that_is_a_file_is_one_clear_notice(root, monkeypatch):
    calls = []
    fake_amptui(monkeypatch, calls)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        shutil.rmtree(root)
        root.write_text("not a folder\n")
        notes = Notes().install(app)
        await pilot.press("r")
        await pilot.press("a")
        await until(pilot, lambda: len(notes) >= 2)
        assert all("is a file, not a folder" in m for m, _ in notes)
        assert "FileExistsError" not in notes.text() and not calls


# --- run screen: alarms and log --------------------------------------------------------------------------

@async_test
async def test_long_alarm_and_log_lines_wrap_at_120_columns(root):
    long = "loss scale collapsed: " + "overflow in layer.weight " * 8 + "END-OF-ALARM"
    with open(root / SCALER / "events.jsonl", "a") as fh:
        fh.write(json.dumps(record(WarningRecord(message=long), t=FROZEN_NOW - 1)) + "\n")
    with open(root / SCALER / "output.log", "a") as fh:
        fh.write("a long log line " + "x" * 200 + " END-OF-LOG\n")
    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await until(pilot, lambda: not screen.model.loading and screen.model.run.end is not None)
        await until(pilot, lambda: screen.drawn() and screen.model.log_seq > 0)
        await settled(pilot)
        bar = screen.query_one("#warning-bar")
        assert "END-OF-ALARM" in str(bar.render()) and bar.size.height >= 2
        log = screen.query_one("#log")
        text = "".join(strip.text for strip in log.lines)
        assert "END-OF-LOG" in text and log.max_scroll_x == 0


# --- compare -----------------------------------------------------------------------------------------------

@async_test
async def test_compare_shows_preset_warns_on_differences_and_exports(root):
    app = app_for(root, watch=root / QUICK)
    async with app.run_test(size=(110, 34)) as pilot:
        app.open_compare([root / QUICK, root / SCALER])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        await pilot.pause()
        screen = app.screen
        cells = [str(c) for c in screen.query_one("#compare-table").get_row(SCALER)]
        assert "fp16+scaler" in cells and "48.44%" in cells  # 110 columns: short forms, whole columns left out
        warning = str(screen.query_one("#compare-warning").render())
        assert "differ in more than precision" in warning and "data.batch_size" in warning
        notes = Notes().install(app)
        await pilot.press("m")
        await until(pilot, lambda: notes)
        (md,) = root.glob("compare-*.md")
        assert str(md) in notes.text() and "| run |" in md.read_text() or "| run" in md.read_text()
        await pilot.press("v")
        await until(pilot, lambda: list(root.glob("compare-*.csv")))
        (csv,) = root.glob("compare-*.csv")
        assert "preset" in csv.read_text().splitlines()[0]


@async_test
async def test_compare_of_an_ab_pair_has_no_warning(root):
    pair = root / "20261121-231544-quickstart-9999"
    shutil.copytree(root / QUICK, pair)
    text = (pair / "config.toml").read_text().replace("autocast = true", "autocast = false")
    (pair / "config.toml").write_text(text)
    app = app_for(root, watch=root / QUICK)
    async with app.run_test(size=(110, 34)) as pilot:
        app.open_compare([root / QUICK, pair])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        await pilot.pause()
        assert not app.screen.query_one("#compare-warning").display


@async_test
async def test_a_figure_reads_the_same_on_the_run_screen_the_list_and_compare(root):
    """val acc and final loss: one formatter for the run screen, the run list and the compare table."""
    from amptui.core.comparison.compare import HEADERS

    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, 3)
        await select_run(pilot, SCALER)
        detail = str(home.query_one("#run-detail").content)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.run.end is not None and not screen.model.loading)
        await until(pilot, screen.drawn)  # the screen renders the model on a timer
        await settled(pilot)
        stats = str(screen.query_one("#stats").render())
        app.open_compare([root / SCALER, root / QUICK])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        row = app.screen.row_cells(app.screen.rows[0])
        assert "val acc" in HEADERS
        assert f"val acc {row['val acc']}" in stats and f"val acc {row['val acc']}" in detail
        assert f"final loss {row['final loss']}" in detail


@async_test
async def test_the_log_stays_on_its_newest_line_when_a_warning_bar_takes_rows_from_it(root):
    """The warning bar appears after the log was drawn: the log panel gets shorter, and its newest
    line must still show (RichLog scrolls only when it writes; nothing more is written here)."""
    with open(root / SCALER / "output.log", "a") as fh:
        fh.write("".join(f"line {i}\n" for i in range(60)) + "NEWEST-LINE\n")
    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await until(pilot, lambda: not screen.model.loading and screen.drawn() and screen.model.log_seq > 0)
        log = screen.query_one("#log")
        height = log.size.height
        long = "loss scale collapsed: " + "overflow in layer.weight " * 8 + "END-OF-ALARM"
        with open(root / SCALER / "events.jsonl", "a") as fh:
            fh.write(json.dumps(record(WarningRecord(message=long), t=FROZEN_NOW - 1)) + "\n")
        await until(pilot, lambda: log.size.height < height)  # the bar took its rows
        await until(pilot, screen.drawn)
        assert log.is_vertical_scroll_end and log.max_scroll_y > 0
