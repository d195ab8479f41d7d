"""Pictures people trust: axes in steps and the unit's own numbers, plots inside their frames at any
size, compare's "is the accuracy the same?", and SVGs that leave the terminal and render elsewhere."""

from __future__ import annotations

import re

import pytest

from amptui.core import axis
from amptui.core.series import interpolate, rolling_median
from amptui.dashboard.picture import parse_size, pin_cells

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
