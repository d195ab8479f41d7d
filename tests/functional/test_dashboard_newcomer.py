"""A newcomer's first hour on the dashboard (issue 36): the footer fits 80 columns, keys jump
between panes and to the ends of the run list, the palette lists each command once, the filter
drives the toggles (r never launches a preset the list hides), and the run screen opens at what
the run's files already say."""

from __future__ import annotations

import threading

from support.dashboard import (
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
from support.trials import trial_copy
from textual.widgets import Footer, OptionList

from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel


@async_test
async def test_the_home_footer_fits_80_columns_with_quit_and_help_on_every_run(root):
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        for run_id in list(table.run_ids):
            await select_run(pilot, run_id)
            await settled(pilot)
            footer = home.query_one(Footer)
            keys = {getattr(k, "key_display", "") for k in footer.children}
            assert {"q", "f1", "r", "a", "t"} <= keys, (run_id, keys)
            assert all(k.region.right <= 80 for k in footer.children), \
                (run_id, [(getattr(k, "key_display", ""), k.region) for k in footer.children])


@async_test
async def test_the_palette_lists_quit_once(root):
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        titles = [c.title for c in app.get_system_commands(home)]
        assert titles.count("Quit") == 1, titles
        assert "Theme" in titles  # Textual's own commands stay


@async_test
async def test_number_keys_jump_between_panes_and_home_end_reach_the_ends_of_the_runs(root):
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        await pilot.press("3")
        await until(pilot, lambda: app.focused is table)
        await pilot.press("end")
        await until(pilot, lambda: table.cursor_row == table.row_count - 1)
        await pilot.press("home")
        await until(pilot, lambda: table.cursor_row == 0)
        await pilot.press("2")
        await until(pilot, lambda: app.focused is not None and app.focused.id == "t-amp-autocast")
        await pilot.press("escape")  # out of the toggle, as a user leaves a field
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.focused, OptionList) and app.focused.id == "presets")


@async_test
async def test_a_filter_that_hides_every_preset_empties_the_toggles_and_r_a_t_refuse(root, monkeypatch):
    from amptui.jobs import detached

    started = []
    monkeypatch.setattr(detached, "start", lambda args, timeout=180: started.append(args) or (None, "no"))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        home = await home_ready(pilot, 3)
        await pilot.press("slash", *"zzz-nothing")
        await until(pilot, lambda: home.query_one("#presets", OptionList).option_count == 0)
        await until(pilot, lambda: home.preset is None)
        toggles = home.query_one(TogglesPanel)
        assert "zzz-nothing" in toggles.invalid_preset
        assert "zzz-nothing" in str(home.query_one("#preset-desc").render())
        await pilot.press("escape")
        for key in ("r", "a", "t"):
            await pilot.press(key)
            await until(pilot, lambda: any("hides them all" in m for m, _ in notes))
            notes.clear()
        await settled(pilot)
        assert started == []  # nothing launched
        home.query_one("#runs-filter").value = ""  # the filter cleared: a preset and its toggles again
        await until(pilot, lambda: home.preset is not None and not toggles.invalid_preset)


@async_test
async def test_the_run_screen_opens_at_what_the_runs_files_say_before_the_first_poll(tmp_path, monkeypatch):
    from amptui.dashboard import runtail

    root = copy_runs(tmp_path / "runs", live=True)
    gate = threading.Event()
    real_poll = runtail.RunTail.poll

    def held_poll(self, now=None):  # the tail's first read held back, as a long history would
        gate.wait(60)
        return real_poll(self, now)

    monkeypatch.setattr(runtail.RunTail, "poll", held_poll)
    app = app_for(root)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await home_ready(pilot, 3)
            app.open_run(root / QUICK)
            await until(pilot, lambda: isinstance(app.screen, RunScreen))
            screen = app.screen
            await settled(pilot)
            header = str(screen.query_one("#run-header").render())
            progress = str(screen.query_one("#progress-text").render())
            assert "quickstart" in header and "completed" in header, header
            assert "starting" not in header and "unnamed device" not in header, header
            assert "320" in progress, progress
            gate.set()
            await until(pilot, lambda: not screen.model.loading)
            await settled(pilot)
            assert "completed" in str(screen.query_one("#run-header").render())
    finally:
        gate.set()
    assert LIVE and SCALER  # the canned runs this module leans on


def test_a_tune_trial_is_not_offered_for_resume_and_shows_steps_not_a_bound_epoch_total(root):
    from amptui.core.run import runops
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.screens.run.header import progress_line

    plain = trial_copy(root, "20261121-231610-quickstart-aaaa", "quickstart")
    trial = trial_copy(root, "20261121-231611-quickstart-tune-8a42-2-bbbb", "quickstart-tune-8a42-2")
    assert runops.resume_refusal(plain) is None
    assert "trial of a tune" in (runops.resume_refusal(trial) or "")
    model = RunModel(trial.name)
    model.feed([{"kind": "start", "t": 1.0, "rank": 0, "preset": "quickstart-tune-8a42-2", "total_steps": 20,
                 "config": {"run": {"name": "quickstart-tune-8a42-2", "epochs": 1000, "max_steps": 20}}},
                {"kind": "step", "t": 2.0, "rank": 0, "step": 12, "epoch": 1, "loss": 1.0}])
    line = str(progress_line(model))
    assert "1000" not in line and "12/20" in line.replace(" ", ""), line


@async_test
async def test_the_home_screen_hides_resume_for_a_tune_trial(root):
    trial = trial_copy(root, "20261121-231611-quickstart-tune-8a42-2-bbbb", "quickstart-tune-8a42-2")
    plain = trial_copy(root, "20261121-231610-quickstart-aaaa", "quickstart")
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        home = await home_ready(pilot, 5)
        await select_run(pilot, plain.name)
        await until(pilot, lambda: "resume" in {b.binding.action for b in home.active_bindings.values()
                                                 if b.binding.show})
        await select_run(pilot, trial.name)
        await until(pilot, lambda: "resume" not in {b.binding.action for b in home.active_bindings.values()
                                                     if b.binding.show})
        await pilot.press("R")
        await until(pilot, lambda: any("trial of a tune" in m for m, _ in notes))


def _long_estimate(high_s: float) -> dict:
    return {"kind": "estimate", "low_s": high_s / 3, "high_s": high_s, "shorter_steps": 14,
            "variants": [{"variant": "fp32", "step_s": 0.1, "steps": 320}, {"variant": "bf16", "step_s": 8.0, "steps": 320}],
            "words": "about 22-66 min for 2 variants x 320 steps (one step of each timed here just now: fp32 0.1 s, "
                     "bf16 8 s; evaluation and checkpoints not counted)"}


@async_test
async def test_a_says_at_once_then_asks_before_a_long_ab_and_offers_fewer_steps(root, monkeypatch):
    from amptui.dashboard.screens.ab.start import AbStartModal
    from amptui.jobs import detached

    asked, started = [], []
    gate = threading.Event()

    def ask(args, kind, timeout=600):
        asked.append(list(args))
        gate.wait(60)  # the estimate takes its time: the toast must not wait for it
        return _long_estimate(3960.0), None

    monkeypatch.setattr(detached, "ask", ask)
    monkeypatch.setattr(detached, "start", lambda args, timeout=180: started.append(list(args)) or (None, "refused in test"))
    app = app_for(root)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            notes = Notes().install(app)
            await home_ready(pilot, 3)
            await pilot.press("a")
            await until(pilot, lambda: any("timing one step" in m for m, _ in notes))
            assert not started and not isinstance(app.screen, AbStartModal)
            gate.set()
            await until(pilot, lambda: isinstance(app.screen, AbStartModal))
            text = str(app.screen.query_one("#ab-start-estimate").render())
            assert "22-66 min" in text and "timed here" in text, text
            assert "--estimate" in asked[0] and "--detach" not in asked[0]
            assert started == []  # nothing starts before the answer
            await pilot.press("s")  # the shorter setting
            await until(pilot, lambda: bool(started))
            assert "run.max_steps=14" in started[0] and "--estimate" not in started[0]
    finally:
        gate.set()


@async_test
async def test_a_short_ab_starts_without_a_dialog_and_says_its_estimate(root, monkeypatch):
    from amptui.dashboard.screens.ab.start import AbStartModal
    from amptui.jobs import detached

    started = []
    monkeypatch.setattr(detached, "ask", lambda args, kind, timeout=600: (_long_estimate(40.0), None))
    monkeypatch.setattr(detached, "start", lambda args, timeout=180: started.append(list(args)) or (None, "refused in test"))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        await home_ready(pilot, 3)
        await pilot.press("a")
        await until(pilot, lambda: bool(started))
        assert not isinstance(app.screen, AbStartModal)
        assert any("estimate: about" in m for m, _ in notes)


def _active_group(root, runs: list[str]):
    import os

    from amptui.core.run.runs import launch_identity
    from amptui.jobs import groups

    group = groups.create(root, "quickstart", "quickstart", {}, None, lambda g: launch_identity(os.getpid()))
    group.update(state="running", runs=runs, variants=["fp32", "bf16"])
    return group


@async_test
async def test_shift_s_cancels_the_whole_ab_of_the_highlighted_run(root):
    group = _active_group(root, [QUICK])
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        home = await home_ready(pilot, 3)
        await select_run(pilot, SCALER)  # not part of the A/B: says so, cancels nothing
        await pilot.press("S")
        await until(pilot, lambda: any("not part of a running A/B" in m for m, _ in notes))
        assert not group.cancel_file.exists()
        await select_run(pilot, QUICK)
        await pilot.press("S")
        await until(pilot, lambda: group.cancel_file.exists())
        await until(pilot, lambda: any("cancelled: no further variant starts" in m for m, _ in notes))
        assert home is app.screen


@async_test
async def test_an_ab_whose_step_cannot_be_timed_still_starts_and_says_there_is_no_estimate(root, monkeypatch):
    from amptui.jobs import detached

    started = []
    none = {"kind": "estimate", "error": "RuntimeError: x", "words": "none (one step could not be timed here: x)"}
    monkeypatch.setattr(detached, "ask", lambda args, kind, timeout=600: (none, None))
    monkeypatch.setattr(detached, "start", lambda args, timeout=180: started.append(list(args)) or (None, "refused in test"))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        await home_ready(pilot, 3)
        await pilot.press("a")
        await until(pilot, lambda: bool(started))
        assert any("estimate: none" in m for m, _ in notes)


def test_the_estimate_is_advice_a_step_that_cannot_be_timed_gives_none_with_why(monkeypatch):
    from amptui.cli import estimate
    from amptui.core.config import presets
    from amptui.trainer import steptime

    def fails(cfg):
        raise RuntimeError("no kernel for this op")

    monkeypatch.setattr(steptime, "time_steps", fails)
    found = estimate.ab_estimate_or_why(presets.find_preset("quickstart"), {}, [("fp32", {"amp.autocast": False})])
    assert found["error"] and "no kernel for this op" in found["words"]
    assert estimate.span(40, 100) == "40 s-2 min" and estimate.span(600, 1800) == "10-30 min"


@async_test
async def test_shift_s_on_a_tune_trial_stops_the_whole_tune(root):
    import json
    import subprocess
    import sys

    from amptui.core.run.runs import launch_identity

    trial = trial_copy(root, "20261121-231611-quickstart-tune-8a42-2-bbbb", "quickstart-tune-8a42-2")
    tune = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # stands in for `amptui tune`
    try:
        (root / "20261121-231600-quickstart-tune-8a42.tune.json").write_text(json.dumps({
            "tune_id": "20261121-231600-quickstart-tune-8a42", "status": "running", **launch_identity(tune.pid),
            "trials": [{"candidate": "bf16", "run_id": trial.name, "status": "running"}]}))
        app = app_for(root)
        async with app.run_test(size=(120, 40)) as pilot:
            notes = Notes().install(app)
            await home_ready(pilot, 4)
            await select_run(pilot, trial.name)
            await pilot.press("S")
            await until(pilot, lambda: tune.poll() is not None)  # SIGINT: what Ctrl-C does to the tune
            assert any("no further trial starts" in m for m, _ in notes)
    finally:
        if tune.poll() is None:
            tune.kill()
        tune.wait()


def test_the_first_look_at_a_long_history_reads_its_two_ends(tmp_path):
    import json
    import shutil

    from support.dashboard import FIXTURES

    from amptui.dashboard.screens.run.header import FIRST_LOOK_MAX_BYTES, first_look, header_line, progress_line

    run = shutil.copytree(FIXTURES / "runs" / QUICK, tmp_path / QUICK)
    lines = (run / "events.jsonl").read_text().splitlines()
    start, end = lines[0], lines[-1]
    step = json.dumps({"v": 1, "kind": "step", "t": 1795302950.0, "rank": 0, "step": 1, "epoch": 1, "loss": 1.0},
                      separators=(",", ":"))
    count = FIRST_LOOK_MAX_BYTES // len(step) + 1000
    body = "\n".join(step.replace('"step":1,', f'"step":{i},') for i in range(1, count + 1))
    (run / "events.jsonl").write_text(f"{start}\n{body}\n{end}\n")
    assert (run / "events.jsonl").stat().st_size > FIRST_LOOK_MAX_BYTES
    model = first_look(run)
    header = str(header_line(model, 1795302960.0))
    assert "quickstart" in header and "completed" in header, header
    assert f"step {count}/" in str(progress_line(model)), str(progress_line(model))  # the latest step, not 0
