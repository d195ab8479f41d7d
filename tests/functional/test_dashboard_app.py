"""Pilot tests of the dashboard: every screen and key, driven headless on canned runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.dashboard import (
    FAILED,
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

from amptui.core.config import presets as presetmod
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.modals import ConfirmModal, SaveAsModal
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs.spawn import amptui_python

# --- home -------------------------------------------------------------------------------------------

@async_test
async def test_home_shows_presets_toggles_history_and_keys(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        names = [p.name for p in home.presets]
        assert names[0] == "quickstart" and {"scaler-lab", "mlp-recipe", "alexnet-cifar10"} <= set(names)
        toggles = home.query_one(TogglesPanel)
        assert toggles.overrides()["data.batch_size"] == 64
        assert toggles.overrides()["optim.lr"] == 0.003
        table = home.query_one(RunTable)
        assert set(table.run_ids) == {QUICK, SCALER, FAILED}
        row = table.get_row(FAILED)
        assert str(row[1]) == "b640"  # the short id that tells it apart
        assert "failed" in str(row[3]) and "20/320" in str(row[6])
        keys = {b.binding.key for b in app.active_bindings.values() if b.binding.show}
        assert {"r", "a", "t", "c", "q"} <= keys
        from amptui.dashboard.screens.help import key_rows  # s and w: in help (the footer fits 80 columns)

        assert {"Save", "Watch"} <= {what for _, what, _ in key_rows(home)}


@async_test
async def test_highlighting_a_preset_loads_its_toggles(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        names = [p.name for p in presetmod.list_presets()]
        await pilot.press(*["down"] * names.index("scaler-lab"))
        await until(pilot, lambda: home.preset.name == "scaler-lab")
        values = home.query_one(TogglesPanel).overrides()
        assert values["amp.dtype"] == "float16" and values["amp.grad_scaler"] is True
        assert values["data.batch_size"] == 32 and values["run.epochs"] == 8


@async_test
async def test_invalid_value_is_marked_as_you_type_and_run_is_refused(root, monkeypatch):
    calls = []
    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", lambda *a, **k: calls.append(a))
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        box = home.query_one("#t-data-batch-size")
        box.focus()
        box.value = ""
        await pilot.press("0")
        await pilot.pause()
        assert box.has_class("-invalid")
        error = str(home.query_one("#toggle-error").render())
        assert "data.batch_size must be >= 1" in error
        await pilot.press("escape", "r")
        await pilot.pause()
        assert not calls
        assert any("batch_size" in m and sev == "error" for m, sev in notes)
        # lr takes TOML numbers like the CLI: 1e-4 is fine, "fast" is not
        lr = home.query_one("#t-optim-lr")
        lr.value = "1e-4"
        await pilot.pause()
        assert not lr.has_class("-invalid")
        lr.value = "fast"
        await pilot.pause()
        assert lr.has_class("-invalid")


@async_test
async def test_r_launches_the_detached_trainer_and_opens_the_run(root, monkeypatch):
    seen = {}

    def fake_run(command, **kwargs):
        seen["command"] = command
        copy_runs(root, live=True)
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps({"kind": "run", "run_id": LIVE}) + "\n", stderr="")

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_run)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        home.query_one("#t-amp-autocast").focus()
        await pilot.press("space")  # autocast off
        home.query_one("#t-run-max-steps").value = "50"
        home.query_one("#presets").focus()
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        command = seen["command"]
        assert command[:5] == [*amptui_python(), "-m", "amptui", "run"] and command[5] == "quickstart"
        assert "--detach" in command and str(root.resolve()) in command
        sets = [command[i + 1] for i, c in enumerate(command) if c == "--set"]
        assert sets == ["amp.autocast=false", "run.max_steps=50"]
        assert app.screen.run_dir.name == LIVE


@async_test
async def test_a_refused_launch_shows_the_reason(root, monkeypatch):
    def fake_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 2, stdout="", stderr="amptui: error: CUDA requested but none\n")

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_run)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        notes = Notes().install(app)
        await pilot.press("r")
        await until(pilot, lambda: ("CUDA requested but none", "error") in notes)  # after "starting quickstart…"
        assert isinstance(app.screen, HomeScreen)
        await pilot.pause()
        assert "run refused: CUDA requested but none" in str(app.screen.query_one("#toggle-error").render())


@async_test
async def test_a_worker_that_raises_shows_the_error_and_the_app_keeps_running(root, monkeypatch):
    """Not a refusal but a bug in the launch worker: its error is shown, the app stays up, and the
    "a run is already starting" flag is cleared, so r starts again."""
    calls = []

    def broken_run(command, **kwargs):
        calls.append(command)
        raise RuntimeError("launcher exploded")

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", broken_run)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        await pilot.press("r")
        await until(pilot, lambda: any("launcher exploded" in m and sev == "error" for m, sev in notes))
        assert app.is_running and app.screen is home  # and r starts again: the flag was cleared
        await pilot.press("r")
        await until(pilot, lambda: len(calls) == 2)
        assert "already starting" not in notes.text()
        assert app.is_running and app.screen is home


@async_test
async def test_a_stop_worker_that_raises_leaves_the_run_screen_usable(root, monkeypatch):
    copy_runs(root, live=True)

    def broken_stop(run_dir, wait_s=60.0):
        raise RuntimeError("stop exploded")

    monkeypatch.setattr("amptui.jobs.launch.stop", broken_stop)
    app = app_for(root, watch=root / LIVE)
    async with app.run_test(size=(110, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.status == "running")
        screen = app.screen
        notes = Notes().install(app)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await until(pilot, lambda: any("stop exploded" in m and sev == "error" for m, sev in notes))
        assert app.is_running and app.screen is screen
        assert screen.refusal("stop") is None  # s applies again


@async_test
async def test_save_as_round_trip(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        toggles = home.query_one(TogglesPanel)
        home.query_one("#t-amp-autocast").value = False
        home.query_one("#t-amp-grad-scaler").value = False
        home.query_one("#t-amp-dtype").value = "bfloat16"
        home.query_one("#t-dist-mode").value = "ddp"
        home.query_one("#t-dist-nproc-per-node").value = "2"
        home.query_one("#t-run-device").value = "cpu"
        home.query_one("#t-data-batch-size").value = "48"
        home.query_one("#t-optim-lr").value = "5e-4"
        home.query_one("#t-run-epochs").value = "2"
        home.query_one("#t-run-max-steps").value = "7"
        await pilot.pause()
        before = toggles.overrides()
        home.query_one("#presets").focus()
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SaveAsModal))
        await pilot.press(*"quickstart")  # a built-in name is refused
        await pilot.press("enter")
        assert isinstance(app.screen, SaveAsModal)
        assert "built-in" in str(app.screen.query_one("#save-msg").render())
        app.screen.query_one("#name").value = ""
        await pilot.press(*"my-ddp", "enter")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        assert (presetmod.saved_dir() / "my-ddp.toml").is_file()
        await until(pilot, lambda: home.preset.name == "my-ddp")
        assert [p for p in home.presets if p.name == "my-ddp"][0].builtin is False
        assert toggles.overrides() == before
        # loaded fresh from disk: the same values
        cfg = presetmod.find_preset("my-ddp").config()
        for key, value in before.items():
            assert cfg.get(key) == value, key
        # saving again under the same name asks before overwriting
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SaveAsModal))
        await pilot.press(*"my-ddp", "enter")
        assert isinstance(app.screen, SaveAsModal)
        assert "exists" in str(app.screen.query_one("#save-msg").render())
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))


@async_test
async def test_save_as_cancel_writes_nothing(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SaveAsModal))
        await pilot.press(*"nope", "escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        assert not (presetmod.saved_dir() / "nope.toml").exists()


# --- run screen -----------------------------------------------------------------------------------------

@async_test
async def test_w_opens_a_failed_run_with_its_error_and_q_goes_back(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await select_run(pilot, FAILED)
        assert "RuntimeError: debug.fail_at_step" in str(app.screen.query_one("#run-detail").render())
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.run.end is not None and screen.query_one("#error-panel").display)
        text = str(screen.query_one("#error-panel").render())
        assert "run failed" in text and "RuntimeError: debug.fail_at_step" in text
        assert "failed" in str(screen.query_one("#run-header").render())
        await pilot.press("s")  # not running: nothing to stop
        assert not isinstance(app.screen, ConfirmModal)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))


@async_test
async def test_finished_run_fills_every_panel(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await select_run(pilot, SCALER)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.run.end is not None and not screen.model.loading)
        await until(pilot, screen.drawn)  # the screen renders the model on a timer
        await settled(pilot)
        m = screen.model
        assert m.run.step == 256 and m.n_backoff == 37 and m.run.skipped_total == 37 and m.n_growth > 0
        assert "skipped 37" in str(screen.query_one("#scale-info").render())
        events = str(screen.query_one("#scale-list").render())  # every event, newest first; it scrolls
        assert events.index("step 253") < events.index("step 251") and "inf in head.weight" in events
        assert events.count("step ") == min(37 + m.n_growth, 200)
        assert "r0 rss" in str(screen.query_one("#mem-info").render())
        assert len(screen.query_one("#log").lines) > 3
        assert "completed" in str(screen.query_one("#run-header").render())
        assert screen.query_one("#progress").percentage == 1.0


@async_test
async def test_live_run_stop_confirm_and_detach(root, monkeypatch):
    copy_runs(root, live=True)
    stops = []

    def fake_stop(run_dir, wait_s=60.0):
        stops.append(Path(run_dir).name)
        from amptui.core.run.runs import RunInfo

        return RunInfo(run_id=Path(run_dir).name, path=Path(run_dir), status="stopped", step=121)

    monkeypatch.setattr("amptui.jobs.launch.stop", fake_stop)
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await select_run(pilot, LIVE)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.status == "running" and screen.model.run.step == 120)
        await until(pilot, screen.drawn)  # the screen renders the model on a timer
        await settled(pilot)
        header = str(screen.query_one("#run-header").render())
        assert "running" in header and "ETA" in header and "elapsed 0:07" in header
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen)
        assert not stops
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await until(pilot, lambda: stops == [LIVE])
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))


@async_test
async def test_panel_keys_at_80x24(root):
    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        assert screen.has_class("-compact")
        assert screen.query_one("#p-loss").display and not screen.query_one("#p-scale").display
        await pilot.press("3")
        assert screen.query_one("#p-scale").display and not screen.query_one("#p-loss").display
        await pilot.press("n")
        assert screen.query_one("#p-mem").display
        # the warning bar appears once the run's records are in; click after that layout change
        await until(pilot, lambda: screen.model.run.end is not None and not screen.model.loading)
        await until(pilot, screen.drawn)  # the screen renders the model (and the bar) on a timer
        await settled(pilot)
        await pilot.click("#panel-tabs", offset=(3, 0))  # the mouse: " 1 loss "
        await pilot.pause()
        assert screen.query_one("#p-loss").display and not screen.query_one("#p-mem").display
        keys = {b.binding.key for b in app.active_bindings.values() if b.binding.show}
        assert {"d", "q", "c"} <= keys
        assert not {"s", "R"} & keys  # a completed run: nothing to stop, nothing to resume
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert not screen.has_class("-compact")
        assert all(screen.query_one(f"#p-{k}").display for k in ("loss", "lr", "scale", "mem", "speed", "log"))
        await pilot.press("2")  # wide: a number maximizes its panel, again (or escape) restores
        assert screen.maximized is screen.query_one("#p-lr")
        await pilot.press("escape")
        assert screen.maximized is None


@async_test
async def test_watch_mode_q_quits_and_d_goes_home(root):
    app = app_for(root, watch=root / QUICK)
    async with app.run_test(size=(110, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await pilot.press("q")
    assert app.return_code == 0

    app = app_for(root, watch=root / QUICK)
    async with app.run_test(size=(110, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


@async_test
async def test_killed_run_is_explained(root):
    src = root / FAILED
    lines = (src / "events.jsonl").read_text().splitlines()
    dead = root / "20261121-231610-quickstart-dead"
    dead.mkdir()
    (dead / "config.toml").write_text((src / "config.toml").read_text())
    (dead / "events.jsonl").write_text("\n".join(line for line in lines if '"kind":"end"' not in line) + "\n")
    (dead / "run.json").write_text(json.dumps({"pid": 2 ** 22 + 7, "host": __import__("socket").gethostname()}))
    app = app_for(root, watch=dead)
    async with app.run_test(size=(110, 34)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.model.status == "killed" and screen.query_one("#error-panel").display)
        assert "process is gone" in str(screen.query_one("#error-panel").render())


@async_test
async def test_torn_and_garbage_lines_do_not_crash(root):
    path = root / QUICK / "events.jsonl"
    with open(path, "a") as fh:
        fh.write('not json\n{"v":1,"kind":"step","step":"x","loss":"bad"}\n{"v":1,"kind":"st')
    app = app_for(root, watch=root / QUICK)
    notes = Notes().install(app)
    async with app.run_test(size=(110, 34)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.model.run.end is not None and not screen.model.loading)
        await settled(pilot)
        assert screen.model.run.step == 320
        await until(pilot, lambda: "unreadable" in notes.text())
        with open(path, "a") as fh:  # the torn record completes; another bad line arrives
            fh.write('ep"}\nmore garbage\n')
        await until(pilot, lambda: screen.model.bad_lines == 3)  # a record of the wrong types counts too
        await settled(pilot)
    reports = [m for m, _ in notes if "unreadable" in m]
    assert reports == ["skipped 2 unreadable line(s) in the event files; everything else was read"], \
        "reported once"


# --- compare ------------------------------------------------------------------------------------------------

@async_test
async def test_space_marks_and_c_compares(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        await pilot.press("c")  # nothing marked: explained, stays home
        assert isinstance(app.screen, HomeScreen) and "mark two" in notes.text()
        await select_run(pilot, QUICK)
        await pilot.press("space")
        await select_run(pilot, SCALER)
        await pilot.press("space")
        table = home.query_one(RunTable)
        assert table.marked == [QUICK, SCALER]
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        rows = app.screen.rows
        assert [r.run_id for r in rows] == [QUICK, SCALER]
        assert rows[0].speedup == 1.0 and rows[1].skipped == 37
        cells = app.screen.query_one("#compare-table").get_row(SCALER)
        assert "fp16+scaler" in [str(c) for c in cells]  # at 110 columns the short form
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await select_run(pilot, QUICK)
        await pilot.press("space")  # unmark
        assert table.marked == [SCALER]


@async_test
async def test_c_on_a_run_screen_compares_with_the_marked_runs(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await select_run(pilot, QUICK)
        await pilot.press("space")
        await select_run(pilot, FAILED)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
        assert [r.run_id for r in app.screen.rows] == [QUICK, FAILED]


# --- the command line -----------------------------------------------------------------------------------------

def test_watch_with_a_bad_run_id_is_one_line_and_exit_2(root, capsys):
    from amptui.cli.main import main

    assert main(["watch", "nope", "--runs-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run 'nope'" in err and "Traceback" not in err
    assert main(["watch", "../etc", "--runs-dir", str(root)]) == 2


@async_test
async def test_the_log_wraps_its_lines_again_when_the_terminal_is_resized(root):
    from amptui.dashboard.widgets.runlog import RunLog

    app = app_for(root, watch=root / SCALER)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.drawn())
        log = app.screen.query_one("#log", RunLog)
        narrow = len(log.lines)
        await pilot.resize_terminal(200, 40)
        await until(pilot, lambda: log.size.width > 60 and app.screen.drawn())
        # the same lines, each wrapped at the wider panel: fewer rows, none wider than the panel
        assert len(log.lines) < narrow
        assert max(strip.cell_length for strip in log.lines) <= log.scrollable_content_region.width
