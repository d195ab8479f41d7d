"""Snapshot tests: canned event files, a frozen clock, no live times anywhere in the picture.

Update after an intended visual change with:
    python -m pytest tests/functional/test_dashboard_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from support.dashboard import (
    FAILED,
    FROZEN_NOW,
    LIVE,
    QUICK,
    SCALER,
    copy_numerics_run,
    copy_runs,
    drawn_and_flushed,
    settled,
    until,
)
from textual.widgets import Input

from amptui.dashboard.app import make_app
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.modals import RunInfoModal, SaveAsModal
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.machine import cpu as cpu_features


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", "config")  # relative: the same path in every picture
    # The pictures were drawn on a CPU with native bfloat16; this stands in for that CPU, so the
    # toggles summary (which says when a dtype is only emulated) is the same on every machine.
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda path="/proc/cpuinfo": ("Fake CPU", {"avx512_bf16"}))
    copy_runs(tmp_path / "runs")
    return tmp_path / "runs"


def app_for(**kwargs):
    return make_app("runs", clock=lambda: FROZEN_NOW, **kwargs)


async def home_loaded(pilot):
    await until(pilot, lambda: isinstance(pilot.app.screen, HomeScreen)
                and pilot.app.screen.query_one(RunTable).row_count == 3)
    await settled(pilot)


async def run_loaded(pilot):
    screen = pilot.app.screen
    await until(pilot, lambda: isinstance(screen, RunScreen) and not screen.model.loading
                and screen.model.records > 0 and screen.model.log_seq > 0)
    # everything the model holds has been drawn (plots are redrawn at most twice a second), and flushed
    await drawn_and_flushed(pilot, screen)


def test_snapshot_home(runs, snap_compare):
    assert snap_compare(app_for(), terminal_size=(110, 34), run_before=home_loaded)


def test_snapshot_home_80x24(runs, snap_compare):
    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=home_loaded)


def test_snapshot_run_scaler_lab(runs, snap_compare):
    assert snap_compare(app_for(watch=runs / SCALER), terminal_size=(110, 34), run_before=run_loaded)


def test_snapshot_run_live(runs, snap_compare):
    copy_runs(runs, live=True)
    assert snap_compare(app_for(watch=runs / LIVE), terminal_size=(110, 34), run_before=run_loaded)


def test_snapshot_run_failed_80x24(runs, snap_compare):
    assert snap_compare(app_for(watch=runs / FAILED), terminal_size=(80, 24), run_before=run_loaded)


def test_snapshot_run_scale_panel_80x24(runs, snap_compare):
    async def before(pilot):
        await run_loaded(pilot)
        await pilot.press("3")
        await drawn_and_flushed(pilot, pilot.app.screen)

    assert snap_compare(app_for(watch=runs / SCALER), terminal_size=(80, 24), run_before=before)


def test_snapshot_compare(runs, snap_compare):
    async def before(pilot):
        pilot.app.open_compare([runs / QUICK, runs / SCALER, runs / FAILED])
        await until(pilot, lambda: isinstance(pilot.app.screen, CompareScreen) and pilot.app.screen.drawn())
        await settled(pilot)

    assert snap_compare(app_for(watch=runs / QUICK), terminal_size=(110, 34), run_before=before)


def test_snapshot_save_as(runs, snap_compare):
    async def before(pilot):
        await home_loaded(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(pilot.app.screen, SaveAsModal))  # a loaded box is slow
        for box in pilot.app.screen.query(Input):  # a blinking cursor is drawn or not by the clock
            box.cursor_blink = False
        await settled(pilot)
        await pilot.press(*"quickstart")
        await until(pilot, lambda: pilot.app.screen.query_one("#save-msg").render())
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=before)


def test_snapshot_help(runs, snap_compare):
    async def before(pilot):
        await home_loaded(pilot)
        await pilot.press("f1")
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(110, 34), run_before=before)


def test_snapshot_drop_down_open_80x24(runs, snap_compare):
    async def before(pilot):
        await home_loaded(pilot)
        pilot.app.screen.query_one("#t-amp-grad-scaler").focus()
        await pilot.press("enter")
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=before)


def test_snapshot_run_info(runs, snap_compare):
    async def before(pilot):
        await home_loaded(pilot)
        pilot.app.screen.query_one(RunTable).focus()
        await pilot.press("i")
        await until(pilot, lambda: isinstance(pilot.app.screen, RunInfoModal))
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(110, 34), run_before=before)


# --- every panel at 80x24 and 160x50, on canned shapes (tests/support/pictures.py): a flat lr and
# RSS, one throughput outlier, a run resumed from an earlier checkpoint (its steps rewind), and
# two identical loss curves in compare.
@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("panel", ["1", "2", "3", "4", "5", "6"],
                         ids=["loss", "lr", "scale", "memory", "throughput", "log"])
def test_snapshot_panel(runs, snap_compare, panel, size):
    from support.pictures import RESUMED, write_resumed_run

    write_resumed_run(runs)

    async def before(pilot):
        await run_loaded(pilot)
        await pilot.press(panel)  # 80x24: shows that panel; 160x50: maximizes it
        await drawn_and_flushed(pilot, pilot.app.screen)

    assert snap_compare(app_for(watch=runs / RESUMED), terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_snapshot_compare_identical_curves(runs, snap_compare, size):
    from support.pictures import write_twin_runs

    first, second = write_twin_runs(runs)

    async def before(pilot):
        pilot.app.open_compare([first, second])
        await until(pilot, lambda: isinstance(pilot.app.screen, CompareScreen) and pilot.app.screen.drawn())
        await settled(pilot)

    assert snap_compare(app_for(watch=runs / QUICK), terminal_size=size, run_before=before)


def test_snapshot_help_80x24(runs, snap_compare):
    """The key list scrolls inside the dialog, whose last line says so (issue 25: it was clipped)."""
    async def before(pilot):
        await home_loaded(pilot)
        await pilot.press("f1")
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=before)


def test_snapshot_tune_refused_80x24(runs, snap_compare):
    """A tune that refused to start: the title stays, the error wraps to its fix, Why says what to do."""
    from pathlib import Path

    from amptui.dashboard.screens.tune.screen import TuneScreen

    log = Path("runs/quickstart-tune-0001.tune.log")
    log.write_text("amptui: error: model.pretrained: ImageNet weights for resnet18 are not in the torch hub folder "
                   "~/.cache/torch/hub/checkpoints (this machine is offline); put resnet18-f37072fd.pth there, "
                   "or --set model.pretrained=false\n")

    async def before(pilot):
        await home_loaded(pilot)
        screen = TuneScreen(Path("runs/quickstart-tune-0001.tune.json"), log, "quickstart")
        pilot.app.push_screen(screen)
        await until(pilot, lambda: screen.error)
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=before)


def test_snapshot_tune_stopped_80x24(runs, snap_compare):
    """q while fp16+scaler ran (issue 25): no WINNER, no s; fp32 at 1.00x; Why says what was measured
    and what a verdict needs, and that it scrolls."""
    from pathlib import Path

    from support.tune import reviewers_stop, write_tune

    from amptui.dashboard.screens.tune.screen import TuneScreen

    path = write_tune(Path("runs"), reviewers_stop(), interrupted=True)

    async def before(pilot):
        await home_loaded(pilot)
        screen = TuneScreen(path, None, "quickstart")
        pilot.app.push_screen(screen)
        await until(pilot, lambda: screen.result is not None)
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=before)


def test_snapshot_run_range_headroom_heat_map(runs, snap_compare):
    """A float16 run with range samples: the heat map (layers x samples) beside the loss scale."""
    run = copy_numerics_run(runs)
    assert snap_compare(app_for(watch=run), terminal_size=(120, 40), run_before=run_loaded)


def test_snapshot_run_heat_map_80x24(runs, snap_compare):
    run = copy_numerics_run(runs)

    async def before(pilot):
        await run_loaded(pilot)
        await pilot.press("7")
        await drawn_and_flushed(pilot, pilot.app.screen)
    assert snap_compare(app_for(watch=run), terminal_size=(80, 24), run_before=before)


def test_snapshot_run_float8_sqnr_heat_map(runs, snap_compare):
    """A float8 rowwise run (emulated): the heat map's float8 view, each converted linear's SQNR over
    the samples, blocks.1.mlp.proj sinking under the alarm's 10 dB (red) and named under the map."""
    from support.pictures import write_float8_run

    run = write_float8_run(runs)
    assert snap_compare(app_for(watch=run), terminal_size=(120, 40), run_before=run_loaded)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_snapshot_compare_tf32_and_headroom(runs, snap_compare, size):
    """An fp32 baseline on an A100 against float16 with range samples: its TF32 and each run's
    narrowest headroom under the table."""
    from support.pictures import write_headroom_pair

    baseline, sampled = write_headroom_pair(runs)

    async def before(pilot):
        pilot.app.open_compare([baseline, sampled])
        await until(pilot, lambda: isinstance(pilot.app.screen, CompareScreen) and pilot.app.screen.drawn())
        await settled(pilot)

    assert snap_compare(app_for(watch=runs / QUICK), terminal_size=size, run_before=before)


def _plan_layer(name: str, k: int, share: float, db: tuple[float, float, float], choice: str, reason: str) -> dict:
    def fp8(sqnr: float, gain: float) -> dict:
        return {"runs": True, "sqnr_db": sqnr, "grad_input_sqnr_db": sqnr + 0.5, "grad_weight_sqnr_db": sqnr + 1.0,
                "predicted_speedup": gain}
    return {"name": name, "shape": {"m": 2048, "k": k, "n": 2048}, "flops_share": share,
            "recipes": {"bf16": {"sqnr_db": 52.3}, "fp16": {"sqnr_db": 55.1, "headroom_forward": 4.1, "headroom_grad": 11.0},
                        "fp8": fp8(db[0], 1.52), "fp8-rowwise": fp8(db[1], 1.39), "mxfp8": {"runs": False, "why": "-"}
                        if db[2] < 0 else fp8(db[2], 1.0)},
            "choice": choice, "reason": reason}


CANNED_PLAN = {  # plan-lab's plan on an H100, as `amptui plan plan-lab --for H100` measured it on a CPU
    "run_id": "20261127-201500-plan-lab-ab12", "preset": "plan-lab", "device": {"name": "H100 SXM"}, "samples": 4,
    "layers": [_plan_layer("inp", 2048, 0.2, (28.4, 29.1, 28.9), "fp8-rowwise", "fastest recipe above the floor"),
               _plan_layer("hidden.0", 2048, 0.2, (28.6, 29.0, 28.8), "fp8-rowwise", "fastest recipe above the floor"),
               _plan_layer("outlier", 2048, 0.2, (7.8, 15.2, 27.0), "bf16", "float8 under the 20 dB SQNR floor"),
               _plan_layer("hidden.1", 2048, 0.2, (28.5, 29.2, -1), "fp8-rowwise", "fastest recipe above the floor"),
               _plan_layer("head", 2048, 0.2, (28.1, 28.3, 28.2), "fp8-rowwise", "last linear: measured safe")],
    "predicted_speedup": 1.29, "risk": {"lowest_sqnr_db": 28.1, "layer": "head"}, "float8_layers": 4}


def test_snapshot_plan_screen(runs, snap_compare):
    """The plan screen on a canned plan: the table, the SQNR heat map (the outlier red under
    tensorwise float8), the reasons and the step's prediction."""
    from amptui.dashboard.screens.plan.screen import PlanScreen

    async def before(pilot):
        await home_loaded(pilot)
        pilot.app.push_screen(PlanScreen(CANNED_PLAN))
        await until(pilot, lambda: isinstance(pilot.app.screen, PlanScreen))
        await settled(pilot)

    assert snap_compare(app_for(), terminal_size=(110, 34), run_before=before)
