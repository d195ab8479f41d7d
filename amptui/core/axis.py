"""Plot axes people can read: tick positions on round numbers, labels with the digits the spread
needs and the unit's own form (bytes in KiB/MiB/GiB, learning rates in engineering notation,
steps as 1.2k, time as m:ss). No UI here; the dashboard's plots call `ticks` and `labels`.

    lo, hi, at = ticks(683.1e6, 683.6e6, 4, unit="bytes")   # range widened to round numbers
    labels(at, "bytes")                                       # ["680 MiB", "685 MiB", ...]
"""

from __future__ import annotations

import math
from typing import Sequence

from amptui.core.fmt import fmt_duration

# A flat series (a constant lr, an RSS that moves by a few KiB) is drawn as flat: the y range is
# at least this share of the largest value, so the noise of the last digit is not blown up.
FLAT_SHARE = 0.02
MAX_BYTE_PLACES = 3  # more decimals than this in one unit: the ticks step in the unit below
_BINARY = (("B", 1), ("KiB", 1024), ("MiB", 1024 ** 2), ("GiB", 1024 ** 3), ("TiB", 1024 ** 4))


def _nice_step(span: float, count: int) -> float:
    """A step of 1, 2 or 5 times a power of ten that cuts `span` into about `count` pieces."""
    raw = span / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def _byte_unit(value: float) -> tuple[str, float]:
    unit = _BINARY[0]
    for candidate in _BINARY:
        if abs(value) >= candidate[1]:
            unit = candidate
    return unit


def widen(lo: float, hi: float, share: float = FLAT_SHARE) -> tuple[float, float]:
    """The range to draw: at least `share` of the largest magnitude (a flat line stays flat)."""
    floor = share * max(abs(lo), abs(hi)) or 1.0
    if hi - lo < floor:
        mid = (lo + hi) / 2
        lo, hi = mid - floor / 2, mid + floor / 2
    return lo, hi


def ticks(lo: float, hi: float, count: int, unit: str = "") -> tuple[float, float, list[float]]:
    """(lower limit, upper limit, tick positions) for y values in [lo, hi] with about `count` ticks.
    The limits are widened to whole steps; bytes step in round numbers of their display unit."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return lo, hi, []
    lo, hi = widen(lo, hi)
    scale = _byte_unit(max(abs(lo), abs(hi)))[1] if unit == "bytes" else 1.0
    step = _nice_step((hi - lo) / scale, max(1, count - 1)) * scale
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    n = int(round((last - first) / step))
    return first, last, [_clean(first + i * step, step) for i in range(n + 1)]


_CLOCK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)


def x_ticks(lo: float, hi: float, count: int, unit: str = "step") -> tuple[float, float, list[float]]:
    """An x axis (steps, or seconds on a clock's round numbers) spans the data exactly; at least two
    and at most `count` ticks on round numbers inside it."""
    hi = max(hi, lo + 1)
    count = max(2, count)
    if unit == "seconds":
        steps = [float(s) for s in reversed(_CLOCK_STEPS)]
    else:
        top = 10 ** math.ceil(math.log10(hi - lo))
        steps = [top * m / 10 ** k for k in range(0, 12) for m in (1, 0.5, 0.2)]
        steps = [s for s in steps if s >= 1] or [1.0]
    chosen: list[float] = []
    for step in steps:  # the coarsest round step that gives two ticks or more
        at = [v * step for v in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
        if len(at) > count and len(chosen) >= 2:
            break
        chosen = [_clean(v, step) for v in at]
        if len(at) >= min(count, 3):
            break
    return lo, hi, chosen


def _clean(v: float, step: float) -> float:
    """Drop float noise (0.30000000000000004) below a thousandth of the step."""
    digits = max(0, -math.floor(math.log10(step)) + 3) if step > 0 else 6
    return round(v, digits)


def _decimals(values: Sequence[float], scale: float = 1.0) -> int:
    """Digits after the point that write every tick exactly (0.25 needs two), no more."""
    for places in range(7):
        if all(abs(round(v / scale, places) - v / scale) < 1e-6 * max(1.0, abs(v / scale)) for v in values):
            return places
    return 6


def labels(values: Sequence[float], unit: str = "") -> list[str]:
    """Tick labels for `values` (sorted) in `unit`: "bytes", "lr", "step", "seconds" or plain."""
    if not values:
        return []
    if unit == "bytes":
        name, scale, places = byte_format(values)
        return [f"{v / scale:.{places}f} {name}" for v in values]
    if unit == "lr":
        return engineering(values)
    if unit == "step":
        return [short_count(v) for v in values]
    if unit == "seconds":
        return [fmt_duration(v) for v in values]
    places = _decimals(values)
    return [f"{v:,.{places}f}" for v in values]


def byte_format(values: Sequence[float]) -> tuple[str, float, int]:
    """(unit, its size, decimals) for byte ticks: the largest value's unit, unless the ticks step in
    round numbers of the unit below (a flat RSS of 1010 MiB whose range reaches past 1 GiB steps in
    MiB: "975 MiB, 1000 MiB, 1025 MiB", not "0.952148 GiB, 0.976562 GiB, ...")."""
    name, scale = _byte_unit(max(abs(v) for v in values))
    places = _decimals(values, scale)
    index = [u[0] for u in _BINARY].index(name)
    if places > MAX_BYTE_PLACES and index > 0:
        smaller_name, smaller = _BINARY[index - 1]
        smaller_places = _decimals(values, smaller)
        if smaller_places < places:
            return smaller_name, smaller, smaller_places
    return name, scale, places


def engineering(values: Sequence[float]) -> list[str]:
    """One exponent (a multiple of 3) for the whole axis: 0.5e-3, 1.0e-3, 1.5e-3."""
    top = max(abs(v) for v in values)
    if top == 0:
        return ["0" for _ in values]
    exponent = 3 * math.floor(math.log10(top) / 3)
    scale = 10.0 ** exponent
    places = _decimals(values, scale)
    suffix = f"e{exponent}" if exponent else ""
    return ["0" if v == 0 else f"{v / scale:.{places}f}{suffix}" for v in values]


def short_count(n: float) -> str:
    """A step number for an axis: 950, 12k, 1.5M."""
    n = float(n)
    if abs(n) >= 1_000_000:
        return f"{n / 1_000_000:.3g}M"
    if abs(n) >= 10_000:
        return f"{n / 1000:.3g}k"
    return f"{n:.0f}" if n.is_integer() else f"{n:.1f}"


def eng(x: float, digits: int = 3) -> str:
    """One figure in engineering notation with `digits` significant digits: 2.99679e-3 -> "3.00e-3"."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    exponent = 3 * math.floor(math.log10(abs(x)) / 3)
    mantissa = x / 10.0 ** exponent
    if round(abs(mantissa), digits - len(str(int(abs(mantissa))))) >= 1000:  # 999.99e-6 rounds to 1.00e-3
        exponent, mantissa = exponent + 3, mantissa / 1000
    places = max(0, digits - len(str(int(abs(mantissa)))))
    return f"{mantissa:.{places}f}" + (f"e{exponent}" if exponent else "")
