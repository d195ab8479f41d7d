"""Pictures people trust: axes in steps and the unit's own numbers, plots inside their frames at any
size, compare's "is the accuracy the same?", and SVGs that leave the terminal and render elsewhere."""

from __future__ import annotations

import json
import re

from support.dashboard import async_test, settled
from support.pictures import write_resumed_run, write_twin_runs
from textual.app import App

from amptui.core.comparison.lossgaps import loss_gaps
from amptui.core.comparison.runsummary import summarize
from amptui.dashboard.widgets.plot import Figure, Line, MetricPlot


# --- plots stay inside their frames --------------------------------------------------------------------
class PlotApp(App):
    def compose(self):
        yield MetricPlot(id="plot")


def _inside_frame(text: str) -> None:
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if "┌" in line)
    left, right = lines[top].index("┌"), lines[top].index("┐")
    bottom = next(i for i, line in enumerate(lines) if "└" in line)
    for line in lines[:top] + lines[bottom:]:
        assert not re.search("[\u2800-\u28ff●▼▲]", line), line
    for line in lines[top + 1:bottom]:
        marks = [i for i, ch in enumerate(line) if "\u2800" <= ch <= "\u28ff"]
        assert all(left < i < right for i in marks), (left, right, line)


@async_test
async def test_plots_stay_inside_their_frame_at_every_size_and_after_a_resize():
    xs = list(range(1, 401))
    fig = Figure([Line(xs, [2.0 / (1 + x / 50) for x in xs]),
                  Line(xs[::40], [1.0] * 10, marker="●", scatter=True)], x_range=(1, 420))
    app = PlotApp()
    async with app.run_test(size=(100, 30)) as pilot:
        plot = app.query_one(MetricPlot)
        plot.update_figure(fig)
        for size in [(100, 30), (40, 10), (160, 50), (24, 8), (80, 24)]:
            await pilot.resize_terminal(*size)
            await settled(pilot)
            assert plot.size.width == size[0]
            rendered = plot.render().plain
            assert all(len(line) <= size[0] for line in rendered.splitlines())
            _inside_frame(rendered)


# --- compare: is the accuracy the same? -----------------------------------------------------------------
def test_identical_runs_differ_by_zero_inside_the_baselines_noise_band(tmp_path):
    first, second = write_twin_runs(tmp_path)
    band, gaps = loss_gaps([summarize(first), summarize(second)])
    assert band > 0
    (gap,) = gaps
    assert gap.gaps and all(g == 0 for g in gap.gaps) and gap.inside == 1.0


def test_a_drifting_run_leaves_the_band(tmp_path):
    first, second = write_twin_runs(tmp_path)
    events = second / "events.jsonl"
    records = [json.loads(line) for line in events.read_text().splitlines()]
    for rec in records:
        if rec["kind"] == "step" and rec["step"] > 100:
            rec["loss"] += 1.0
    events.write_text("".join(json.dumps(r) + "\n" for r in records))
    band, (gap,) = loss_gaps([summarize(first), summarize(second)])
    assert gap.inside is not None and gap.inside < 0.9
    assert max(gap.gaps) > band


# --- the run screen: one x axis for every panel, steps or time ------------------------------------------
@async_test
async def test_every_panel_shares_the_step_axis_and_t_switches_them_all_to_time(tmp_path, monkeypatch):
    from support.dashboard import app_for, until

    from amptui.dashboard.screens.run.screen import RunScreen

    monkeypatch.chdir(tmp_path)
    run = write_resumed_run(tmp_path / "runs")
    app = app_for(tmp_path / "runs", watch=run)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.drawn())
        screen = app.screen
        plots = [screen.query_one(f"#plot-{key}", MetricPlot) for key in ("loss", "lr", "scale", "mem", "speed")]
        assert {p.figure.x_range for p in plots} == {(1, 160)}  # the resumed run: steps 1..160, drawn once
        xs = plots[0].figure.lines[0].xs
        assert list(xs) == sorted(set(xs))  # the rewound steps 81..120 are not drawn twice
        await pilot.press("t")
        await settled(pilot)
        assert {p.figure.x_unit for p in plots} == {"seconds"}
        (span,) = {p.figure.x_range for p in plots}
        assert span[0] == 0 and 10 < span[1] < 13  # 6 s before the stop, 4 s after the resume
        assert "0:10" in plots[0].render().plain
        await pilot.press("t")
        await settled(pilot)
        assert {p.figure.x_unit for p in plots} == {"step"}
        await pilot.press("p")  # the screen as drawn, saved as SVG into the runs folder
        await until(pilot, lambda: list((tmp_path / "runs").glob("*.svg")))
        (saved,) = (tmp_path / "runs").glob("*.svg")
        assert saved.name.startswith(f"{run.name}-screen-") and "<svg" in saved.read_text()[:200]
