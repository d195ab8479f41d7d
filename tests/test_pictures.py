"""Pictures people trust: axes in steps and the unit's own numbers, plots inside their frames at any
size, compare's "is the accuracy the same?", and SVGs that leave the terminal and render elsewhere."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from support.dashboard import async_test, settled
from support.pictures import RESUMED, write_resumed_run, write_twin_runs
from textual.app import App

from amptui.core import axis
from amptui.core.comparison.lossgaps import loss_gaps
from amptui.core.comparison.runsummary import summarize
from amptui.core.series import interpolate, rolling_median
from amptui.dashboard.picture import parse_size, pin_cells
from amptui.dashboard.widgets.plot import Figure, Line, MetricPlot

MIB = 1024 ** 2


# --- axes -------------------------------------------------------------------------------------------
def test_a_flat_rss_reads_in_whole_mib_not_five_decimals():
    lo, hi, at = axis.ticks(683.08 * MIB, 683.58 * MIB, 5, "bytes")
    text = axis.labels(at, "bytes")
    assert all(t.endswith(" MiB") for t in text) and all("." not in t for t in text), text
    assert lo <= 683.08 * MIB and hi >= 683.58 * MIB


def test_a_flat_rss_next_to_a_unit_boundary_is_labelled_in_the_unit_its_ticks_step_in():
    """1010 MiB flat: the range reaches past 1 GiB, yet the ticks step 20 MiB; GiB labels would need
    six decimals (0.957031 GiB)."""
    for mib in (999.5, 1005, 1010, 1020, 1023.9, 1024, 1030):
        for count in (2, 3, 4, 6):
            _, _, at = axis.ticks(mib * MIB, mib * MIB + 4096, count, "bytes")
            text = axis.labels(at, "bytes")
            places = [len(t.split()[0].partition(".")[2]) for t in text]
            assert max(places) <= 3 and len({t.split()[1] for t in text}) == 1, (mib, count, text)
    _, _, at = axis.ticks(1010 * MIB, 1010 * MIB + 4096, 3, "bytes")
    assert axis.labels(at, "bytes") == ["980 MiB", "1000 MiB", "1020 MiB", "1040 MiB"]
    assert axis.labels([999 * 1024, 1000.5 * 1024, 1002 * 1024], "bytes") == ["999.0 KiB", "1000.5 KiB", "1002.0 KiB"]


def test_bytes_switch_unit_and_keep_the_digits_the_spread_needs():
    assert axis.labels([2 * 1024 ** 3, 4 * 1024 ** 3], "bytes") == ["2 GiB", "4 GiB"]
    assert axis.labels([1.5 * 1024 ** 3, 1.75 * 1024 ** 3], "bytes") == ["1.50 GiB", "1.75 GiB"]


def test_learning_rates_in_engineering_notation_with_one_exponent():
    _, _, at = axis.ticks(0.0005, 0.0015, 5, "lr")
    assert axis.labels(at, "lr") == ["0.50e-3", "0.75e-3", "1.00e-3", "1.25e-3", "1.50e-3"]
    assert axis.engineering([3e-5]) == ["30e-6"]
    assert axis.eng(2.99679e-3) == "3.00e-3"  # a footer's one figure: three significant digits


def test_step_axis_ticks_are_round_steps_inside_the_run():
    _, _, at = axis.x_ticks(1, 114, 5)
    assert at == [20, 40, 60, 80, 100]
    assert len(axis.x_ticks(1, 160, 2)[2]) >= 2  # even a narrow panel names two steps
    assert axis.labels([20000, 1_500_000], "step") == ["20k", "1.5M"]
    assert axis.labels(axis.x_ticks(0, 130, 3, "seconds")[2], "seconds") == ["0:00", "1:00", "2:00"]


def test_rolling_median_is_not_bent_by_one_outlier():
    ys = [1000.0] * 20
    ys[10] = 5000.0
    assert max(rolling_median(ys, 9)) == 1000.0


def test_interpolate_reads_a_curve_between_its_points():
    assert interpolate([1, 1.5, 2, 3], [1, 2], [10.0, 20.0]) == [10.0, 15.0, 20.0, None]


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


# --- pictures out ---------------------------------------------------------------------------------
def test_pinned_svg_puts_each_braille_dot_in_its_own_cell():
    svg = ('<text class="r1" x="10" y="20" textLength="36" clip-path="url(#c)">ab⠒⠒&#160;c</text>')
    out = pin_cells(svg)
    xs = [float(x) for x in re.findall(r'x="([0-9.]+)"', out)]
    assert xs == [10, 22, 28, 40], out  # "ab" keeps one text; each dot its cell (6 wide); "c" after the space
    assert out.count("clip-path") == 4


def test_size_is_checked():
    assert parse_size("120x40") == (120, 40)
    for bad in ("120", "5x5", "x"):
        with pytest.raises(ValueError):
            parse_size(bad)


def _amptui(*args, cwd):
    return subprocess.run([sys.executable, "-m", "amptui", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_compare_format_svg_writes_an_svg_that_renders(tmp_path):
    first, second = write_twin_runs(tmp_path / "runs")
    proc = _amptui("compare", first.name, second.name, "--runs-dir", "runs", "--format", "svg", "--size", "100x30",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = proc.stdout
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "Loss" in svg and "overlaid" in svg
    (tmp_path / "compare.svg").write_text(svg)
    if shutil.which("rsvg-convert") is None:
        pytest.skip("rsvg-convert is not installed (apt-get install librsvg2-bin)")
    png = tmp_path / "compare.png"
    render = subprocess.run(["rsvg-convert", str(tmp_path / "compare.svg"), "-o", str(png)], capture_output=True,
                            text=True, timeout=60)
    assert render.returncode == 0, render.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_watch_svg_draws_the_run_screen_headless_and_refuses_a_bad_size(tmp_path):
    write_resumed_run(tmp_path / "runs")
    out = tmp_path / "run.svg"
    proc = _amptui("watch", RESUMED, "--runs-dir", "runs", "--svg", str(out), "--size", "80x24", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and "160/160" in svg.replace("&#160;", " ")
    bad = _amptui("watch", RESUMED, "--runs-dir", "runs", "--svg", str(tmp_path / "x.svg"), "--size", "9x9",
                  cwd=tmp_path)
    assert bad.returncode == 2 and "--size" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.svg").exists()


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
