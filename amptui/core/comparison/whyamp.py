"""Why AMP did or did not speed a model up, from what its runs measured (no model needed): the fp32
baseline's step time, the FLOPs of one step (start record `step_flops`) and the matmul rates measured
on this device for each run's compute dtype (start record `peak_tflops`, large square products).

Amdahl's law on the step: at the float32 rate the step's matmuls take `gemm` seconds of its `t32`;
the rest (elementwise work, normalisation, the optimizer, framework overhead, waiting for data) does
not get faster in a reduced dtype. So the best a reduced dtype can do is
    t32 / (t32 - gemm + gemm * peak32 / peak_low)
which is near 1 when matmuls are a small share of the step, however fast the dtype's large matmuls are.
The measured speed-up beside that bound says which it was: small share (nothing to gain), or matmuls
that did not reach the large-product rate (small shapes, casts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amptui.core.comparison.comparestep import speed_verdict
from amptui.core.fmt import fmt_flops, fmt_ratio

if TYPE_CHECKING:
    from amptui.core.comparison.runsummary import RunSummary

HELPED = 1.25        # a speed-up at least this large needs no explanation
SMALL_SHARE = 0.25   # matmuls under this share of the fp32 step: too little of it for AMP to change


def _rates(s: RunSummary) -> tuple[float | None, float | None]:
    start = s.start or {}
    flops, peak = start.get("step_flops"), start.get("peak_tflops")
    if isinstance(flops, (int, float)) and isinstance(peak, (int, float)) and flops > 0 and peak > 0:
        return float(flops), float(peak)
    return None, None


def why_line(base: RunSummary, amp: RunSummary) -> str | None:
    """One line on why `amp` is not (much) faster than the fp32 `base`; None when it helped, or when the
    runs lack what the reason needs (step FLOPs, measured rates, steady step times)."""
    if base.precision is None or base.precision.autocast or amp.precision is None or not amp.precision.autocast:
        return None
    if not base.steady_step_ms or not amp.steady_step_ms:
        return None
    measured = base.steady_step_ms / amp.steady_step_ms
    verdict = speed_verdict(amp, base, measured)
    unclear = bool(verdict.same or verdict.unresolved)  # "same speed" or not resolved: no gain shown either
    if measured >= HELPED and not unclear:
        return None
    flops, peak32 = _rates(base)
    _, peak_low = _rates(amp)
    if flops is None or peak32 is None or peak_low is None:
        return None
    t32 = base.steady_step_ms / 1000
    gemm = flops / (peak32 * 1e12)
    share = min(1.0, gemm / t32)
    best = t32 / max(1e-12, t32 - min(gemm, t32) + min(gemm, t32) * peak32 / peak_low)
    dtype, label = amp.precision.reduced, amp.precision.short
    said = "not measurably faster" if unclear else "not faster" if measured < 1.05 else "only " + fmt_ratio(measured)
    head = (f"why {label} is {said}: the model's "
            f"matmuls are {share:.0%} of the {_ms(t32)} fp32 step ({flops / 1e9:.3g} GFLOP at the measured "
            f"{fmt_flops(peak32)})")
    if share < SMALL_SHARE:
        return (head + f"; {dtype} speeds up only those, so this step can gain at most {fmt_ratio(best)} here: "
                "the model is too small for AMP to help (memory may still drop)")
    return (head + f"; at {dtype}'s large-matmul rate ({fmt_flops(peak_low)}) it could reach {fmt_ratio(best)}: "
            "its matmuls are too small for fast kernels, or autocast's casts cost what they saved")


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def why_lines(summaries: list[RunSummary]) -> list[str]:
    """A line for each AMP run that did not help against the first (fp32) run; at most two."""
    if len(summaries) < 2:
        return []
    lines = [line for s in summaries[1:] if (line := why_line(summaries[0], s))]
    return lines[:2]
