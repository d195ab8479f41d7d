"""The gradient-norm panel (amptui/dashboard/panels/gradnorm.py, one file: it declares its series,
the model keeps it): a run whose step records carry grad_norm (amp.clip_grad_norm set, or a script
that calls clip_grad_norm_) shows the unscaled norm per logged step on key 8, with the clipping
threshold; a run without one keeps the panel hidden and its key shows nothing."""

from __future__ import annotations

from pathlib import Path

from support.dashboard import QUICK, app_for, async_test, until
from support.records import record, write_records

from amptui.core.stream.records import End, Start, Step

RUN = "20261129-040000-clipped-1a2b"
T0 = 1795302900.0
NORMS = [9.0, 4.0, 2.5, 1.5, 0.75, 0.5]  # large at first, then under the clip


def write_clipped_run(root: Path) -> Path:
    """A completed run of six logged steps that clipped its gradients at 1.0, each step record
    carrying the norm clip_grad_norm_ returned (as the trainer writes them)."""
    run = Path(root) / RUN
    run.mkdir(parents=True)
    start = Start(run_id=RUN, preset="clipped", config={"amp": {"clip_grad_norm": 1.0}}, precision="fp32",
                  world_size=1, device={"type": "cpu", "name": "Test CPU", "count": 1, "index": None},
                  torch="2.14.1", host="vm", pid=1, total_steps=60)
    steps = [Step(step=10 * (i + 1), epoch=1, loss=2.0 - 0.1 * i, lr=0.01, scale=None, skipped=0, skipped_total=0,
                  samples_per_s=500.0, step_time_ms=4.0, data_wait_ms=None, mem={"rss": 1 << 28, "peak_rss": 1 << 28},
                  grad_norm=norm) for i, norm in enumerate(NORMS)]
    write_records(run / "events.jsonl", [record(start, T0)] + [record(s, T0 + 1 + i) for i, s in enumerate(steps)]
                  + [record(End(status="completed", total_time_s=7.0, steps=60), T0 + 8)])
    return run


@async_test
async def test_a_clipped_run_shows_its_gradient_norm_on_key_8_with_the_threshold(root):
    from amptui.dashboard.screens.run.screen import RunScreen

    run = write_clipped_run(root)
    app = app_for(root, watch=run)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and not app.screen.model.loading
                    and app.screen.drawn())
        screen = app.screen
        panel = screen.query_one("#p-grad_norm")
        assert panel.has_class("-shown") and panel.display
        assert str(panel.border_title) == "8 gradient norm (unscaled)"  # numbered after the heat map's 7
        assert str(panel.border_subtitle) == "now 0.5 · clip 1"
        xs, ys = screen.model.series["grad_norm"].points()
        assert (xs, ys) == ([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], NORMS)  # every logged step's norm, as written
        await pilot.press("8")
        await until(pilot, lambda: screen.maximized is panel)


@async_test
async def test_a_run_without_a_gradient_norm_keeps_the_panel_hidden(root):
    from amptui.dashboard.screens.run.screen import RunScreen

    app = app_for(root, watch=root / QUICK)  # quickstart: amp.clip_grad_norm = 0, no grad_norm written
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and not app.screen.model.loading
                    and app.screen.drawn())
        screen = app.screen
        panel = screen.query_one("#p-grad_norm")
        assert not panel.has_class("-shown") and not panel.display
        await pilot.press("8")
        await pilot.pause()
        assert screen.maximized is None and screen.optional_active is None  # it says why instead (MISSING)
