"""Numbers as people read them: the one formatter per kind of figure, shared by the command line,
the compare table and the dashboard, so a run reads the same in every view.

Missing values are "-". A Python `None` never reaches the text: counts out of a total that was
never given say so in words ("step 96 (total unknown)"). Durations are m:ss (h:mm:ss from an hour), with tenths where short spans
matter (`precise`); accuracy is a percentage with two decimals (69.92%); memory is binary units.
"""

from __future__ import annotations

import math
import re
import time

MISSING = "-"


def fmt_bytes(n: float | None) -> str:
    """1536 -> "1.5 KiB"."""
    if n is None:
        return MISSING
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_duration(seconds: float | None, precise: bool = False) -> str:
    """131.4 -> "2:11" (h:mm:ss from an hour); precise: "2:11.4" under an hour, for tables where
    runs of a few seconds are compared."""
    if seconds is None:
        return MISSING
    seconds = max(0.0, float(seconds))
    if precise and round(seconds, 1) < 3600:
        m, s = divmod(round(seconds, 1), 60)
        return f"{int(m)}:{s:04.1f}"
    whole = int(round(seconds))
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _figure(x: float | None, spec: str, scale: float = 1.0, unit: str = "") -> str:
    return MISSING if x is None else f"{format(scale * x, spec)}{unit}"


def fmt_accuracy(fraction: float | None) -> str:
    """0.69921 -> "69.92%"."""
    return _figure(fraction, ".2f", 100, "%")


def fmt_points(delta: float | None) -> str:
    """An accuracy difference (fractions) in percentage points: 0.0039 -> "+0.39 pt"."""
    return _figure(delta, "+.2f", 100, " pt")


def fmt_change(fraction: float | None) -> str:
    """A relative change such as a memory saving: 0.4 -> "+40.0%"."""
    return _figure(fraction, "+.1f", 100, "%")


def fmt_ratio(x: float | None) -> str:
    """A speed-up: 2.0 -> "2.00x"."""
    return _figure(x, ".2f", unit="x")


def fmt_rate(x: float | None) -> str:
    """Samples (or steps) per second: 3191.4 -> "3191"; below 10, one decimal."""
    return _figure(x, ".1f" if x is not None and abs(x) < 10 else ".0f")


def fmt_loss(x: float | None) -> str:
    return _figure(x, ".4f")


def fmt_lr(x: float | None) -> str:
    """Three significant digits in the form that reads best for the value: 0.01, 0.0003, 1e-05."""
    return _figure(x, ".3g")


def fmt_scale(x: float | None) -> str:
    """A GradScaler scale, wherever one is said (progress line, alarms, notes, numerics findings):
    powers of two from 2 as 2^16, others as they are (1, 0.5, 1.5e+09)."""
    if x is None:
        return MISSING
    if x >= 2 and math.log2(x).is_integer():
        return f"2^{int(math.log2(x))}"
    return f"{x:g}"


def fmt_of(n: int | None, total: int | None) -> str:
    """A count out of a total: "3/20"; without a total (a script that never said it): "3"."""
    count = MISSING if n is None else str(n)
    return f"{count}/{total}" if total else count


def fmt_progress(step: int | None, total: int | None, noun: str = "step") -> str:
    """"step 96/200"; without a known total: "step 96 (total unknown)"."""
    text = f"{noun} {fmt_of(step or 0, total)}"
    return text if total else f"{text} (total unknown)"


def fmt_total(total: int | None, noun: str = "steps") -> str:
    """"200 steps", or "total steps unknown" when the run never said."""
    return f"{total} {noun}" if total else f"total {noun} unknown"


FLOP_UNITS = (("TFLOP/s", 1.0), ("GFLOP/s", 1e3), ("MFLOP/s", 1e6))


def flops_unit(*tflops: float | None) -> tuple[str, float]:
    """The unit in which the largest of these rates (in TFLOP/s) reads as 1 or more: a CPU's
    0.00144 TFLOP/s is 1.44 GFLOP/s. One unit for a whole table or sentence."""
    largest = max((abs(x) for x in tflops if x is not None), default=1.0)
    return next(((name, k) for name, k in FLOP_UNITS if largest * k >= 1), FLOP_UNITS[-1])


def fmt_flops(tflops: float | None, unit: tuple[str, float] | None = None, with_unit: bool = True) -> str:
    """A rate given in TFLOP/s, in `unit` (default: its own) with three significant digits."""
    if tflops is None:
        return "n/a"
    name, k = unit or flops_unit(tflops)
    x = tflops * k
    text = f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"
    return f"{text} {name}" if with_unit else text


def fmt_times_as_fast(a_name: str, a: float, b_name: str, b: float) -> str:
    """Which of two rates is faster and by how much, never a ratio below 1 whose direction the
    reader must guess: "bfloat16 is 1.9 times as fast as float32", "float32 is 85 times as fast
    as bfloat16", "bfloat16 and float32 are about as fast"."""
    if a <= 0 or b <= 0:
        return f"{a_name} and {b_name} could not both be measured"
    fast, slow, ratio = (a_name, b_name, a / b) if a >= b else (b_name, a_name, b / a)
    if ratio < 1.05:
        return f"{a_name} and {b_name} are about as fast"
    times = f"{ratio:.1f}" if ratio < 10 else f"{ratio:,.0f}"
    return f"{fast} is {times} times as fast as {slow}"


def fmt_time(t: float | None) -> str:
    """A unix time as local date and minute: "2026-11-22 16:55"."""
    if t is None:
        return MISSING
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
    except (OverflowError, OSError, ValueError):  # a damaged record's "t": 1e20
        return MISSING


# --- strings from files ---------------------------------------------------------------------------

# C0 (but \t, \n), DEL, C1 (ESC and CSI start a terminal sequence), and what reorders or breaks a
# line where it is shown: bidi marks, overrides and isolates, Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")   # what rich/Textual would read as a style tag


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"  # \u: TOML and JSON read it back as written


def shown(text: object, *, markup: bool = False, newlines: bool = False) -> str:
    """A string read from a file (a record, a config, a folder name) as it may reach a terminal:
    the one way such text is shown (widgets, tables, CSV, SVG, messages). Control characters
    written as \\xNN (ASCII) or \\uNNNN (C1, bidi, line separators) (no escape sequence reaches
    the terminal raw, nothing reorders what follows), tabs and,
    unless `newlines`, line breaks as spaces. `markup`: the text goes where rich/Textual read
    markup, so "[red]" is escaped to show as written (what rich.markup.escape does)."""
    text = str(text).replace("\t", " ")
    if not newlines:
        text = text.replace("\r\n", " ").replace("\n", " ")
    text = _CONTROL.sub(_escaped, text)
    if markup:
        text = _MARKUP_TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
        if text.endswith("\\") and not text.endswith("\\\\"):
            text += "\\"
    return text
