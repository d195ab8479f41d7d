"""Alarms about the loss scale and the loss, raised as `warning` events that say what they mean
and what to try. They look only at numbers each step record has already read from the device,
so they cost nothing extra."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from amptui.core.config.precision import DTYPES
from amptui.core.numerics import LOW_HEADROOM_BITS, layer_headroom, nonfinite_text

BACKOFF_STREAK = 5          # consecutive skipped steps that make an alarm, once the scale has settled
CALIBRATION_STREAK = 16     # before the first growth a high init_scale is still coming down: allow 2**16
STUCK_STEPS = 100           # at least this many steps (and 3 growth intervals) without growth
REPEATED_OVERFLOWS = 10     # backoffs after the first growth (of a dtype that needs a scaler) before suggesting bfloat16
LOW_HEADROOM_SAMPLES = 3    # consecutive range samples with a layer under LOW_HEADROOM_BITS that make an alarm


@dataclass
class Alarm:
    code: str
    message: str


@dataclass
class ScaleAlarms:
    growth_interval: int
    dtype: str                  # the autocast dtype
    bf16_available: bool        # bfloat16 runs natively here (the wide-range alternative)
    raised: set[str] = field(default_factory=set)
    streak: int = 0
    last_growth_step: int = 0
    backoffs_since_growth: int = 0
    grown_once: bool = False
    backoffs_after_growth: int = 0
    source: str = ""            # the latest first non-finite module named on a backoff
    source_where: str = ""      # where it went non-finite: "forward" or "backward"

    @property
    def _narrow_range(self) -> bool:
        """A dtype that needs loss scaling (float16): its overflows are what bfloat16's range avoids."""
        known = DTYPES.get(self.dtype)
        return known is not None and known.needs_scaler

    def _streak_advice(self) -> str:
        """What to do about a backoff streak: a forward overflow is in the activations, which no
        loss scale touches; a gradient overflow may still be the scale's."""
        if self.source_where == "forward":
            return (f"The forward pass itself exceeds {self.dtype}'s range there, which no loss scale can fix: "
                    "use amp.dtype=bfloat16, or scale that layer's init/output")
        return "Lower amp.init_scale, or check those layers"

    def _once(self, code: str, message: str, out: list[Alarm]) -> None:
        if code not in self.raised:
            self.raised.add(code)
            out.append(Alarm(code, message))

    def observe(self, scaler_events: list[dict], last_step: int, scale: float | None,
                loss: float | None, loss_at: str | None = None) -> list[Alarm]:
        """Feed one step record's scaler events (growth/backoff) and values; get new alarms.
        `loss_at`: where a non-finite loss came from ("at step 7"; default: the record's step)."""
        out: list[Alarm] = []
        if loss is None or not math.isfinite(loss):
            self._once("loss_not_finite", f"the loss is not finite (NaN or inf) {loss_at or f'at step {last_step}'}: this is not "
                       "an overflow the GradScaler can fix. Check the data for NaN/inf, lower optim.lr, or enable "
                       "amp.clip_grad_norm; try amp.autocast=false to see whether reduced precision causes it", out)
        for event in scaler_events:
            if event["event"] == "growth":
                self.streak = 0
                self.grown_once = True
                self.last_growth_step = event["step"]
                self.backoffs_since_growth = 0
                self.raised.discard("backoff_streak")
                continue
            self.streak += 1
            if event.get("first_nonfinite"):
                self.source = nonfinite_text(event["first_nonfinite"])
                self.source_where = event["first_nonfinite"].get("where")
            self.backoffs_since_growth += 1
            if self.grown_once:
                self.backoffs_after_growth += 1
            limit = BACKOFF_STREAK if self.grown_once else CALIBRATION_STREAK
            if self.streak >= limit and "backoff_streak" not in self.raised:
                names = ", ".join(event.get("overflow", [])[:3]) or "unknown parameters"
                blame = f"; first non-finite: {self.source}" if self.source else ""
                phase = ("not calibration: the scale had grown before and keeps falling with no growth" if self.grown_once
                         else "longer than a high init_scale needs to calibrate")
                self._once("backoff_streak", f"{self.streak} optimizer steps in a row skipped (up to step "
                           f"{event['step']}), scale now {event['new_scale']:g} ({phase}): gradients overflow at "
                           f"every scale tried, in {names}{blame}. {self._streak_advice()}", out)
            if event["new_scale"] < 1.0:
                self._once("scale_below_one", f"the loss scale fell below 1 ({event['new_scale']:g}) at step "
                           f"{event['step']}: the gradients hold inf/NaN even unscaled, so scaling cannot fix them. "
                           "Look for NaN in the loss or inputs, lower optim.lr, or use amp.dtype=bfloat16", out)
        if scale is not None and self.backoffs_since_growth and \
                last_step - self.last_growth_step >= max(3 * self.growth_interval, STUCK_STEPS):
            self._once("scale_stuck", f"the loss scale has not grown for {last_step - self.last_growth_step} steps "
                       f"(stuck at {scale:g}): gradients overflow again before each growth_interval "
                       f"({self.growth_interval}) completes", out)
        if self._narrow_range and self.bf16_available and self.backoffs_after_growth >= REPEATED_OVERFLOWS:
            self._once("use_bfloat16", f"{self.dtype} overflowed {self.backoffs_after_growth} times after the scale "
                       "settled: this device supports bfloat16, which has float32's range and needs no loss "
                       "scaling; try --set amp.dtype=bfloat16", out)
        return out


@dataclass
class HeadroomAlarms:
    """A layer whose range headroom stays under LOW_HEADROOM_BITS for LOW_HEADROOM_SAMPLES samples
    in a row will overflow soon; a sample that names a first non-finite module says where."""

    dtype: str
    low: dict[str, int] = field(default_factory=dict)   # layer -> consecutive low samples
    raised: set[str] = field(default_factory=set)

    def observe(self, samples: list[Any]) -> list[Alarm]:
        """Feed the window's `numerics` records (core.records.Numerics); get new alarms."""
        out: list[Alarm] = []
        for sample in samples:
            for layer in sample.layers:
                bits = layer_headroom(layer)
                name = layer.get("name", "?")
                if bits is None or bits >= LOW_HEADROOM_BITS or bits == -math.inf:
                    self.low.pop(name, None)
                    continue
                self.low[name] = self.low.get(name, 0) + 1
                if self.low[name] >= LOW_HEADROOM_SAMPLES and name not in self.raised:
                    self.raised.add(name)
                    out.append(Alarm("low_headroom", self._advice(name, bits, sample.step)))
            first = sample.first_nonfinite
            if first and "nonfinite" not in self.raised:
                self.raised.add("nonfinite")
                out.append(Alarm("first_nonfinite", f"step {sample.step} overflowed; first non-finite: "
                                 f"{nonfinite_text(first)}"))
        return out

    def _advice(self, name: str, bits: float, step: int) -> str:
        wide = next((d.name for d in DTYPES.values() if not d.needs_scaler), "bfloat16")
        return (f"{name} has {bits:.1f} bits of range headroom left ({LOW_HEADROOM_SAMPLES} samples in a row under "
                f"{LOW_HEADROOM_BITS:g}, up to step {step}): will overflow {self.dtype} soon: {wide}, or scale this "
                "layer's init/output")
