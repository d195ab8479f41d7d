"""Alarms about the loss scale and the loss, raised as `warning` events that say what they mean
and what to try. They look only at numbers each step record has already read from the device,
so they cost nothing extra."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from amptui.core.config.precision import narrow, wide_dtype
from amptui.core.fmt import fmt_scale
from amptui.core.modes import probes
from amptui.core.numerics import LOW_HEADROOM_BITS, layer_headroom, nonfinite_text

BACKOFF_STREAK = 5          # consecutive skipped steps that make an alarm, once the scale has settled
CALIBRATION_STREAK = 16     # the least calibration is allowed: the default init_scale 2**16 halved down to 1
STUCK_STEPS = 100           # at least this many steps (and 3 growth intervals) without growth
REPEATED_OVERFLOWS = 10     # backoffs after the first growth (of a dtype that needs a scaler) before suggesting bfloat16
LOW_HEADROOM_SAMPLES = 3    # consecutive range samples with a layer under LOW_HEADROOM_BITS that make an alarm
NO_STEP_TRAINED = CALIBRATION_STREAK  # steps, every one skipped, that make the "no step trained yet" alarm


def calibration_streak(init_scale: float | None, backoff_factor: float | None = 0.5) -> int:
    """How many backoffs in a row, before the scale first grows, are still calibration: as many as
    bring `init_scale` down to 1 at `backoff_factor` per backoff (16 for the default 2**16, 32 for
    2**32: the backoffs down to the default scale plus the default's 16), never fewer than 16. A
    streak that goes on below a scale of 1 is no calibration: then even unscaled gradients overflow.
    Unknown or degenerate values (a factor outside (0, 1), an infinite scale) get the 16."""
    if init_scale is None or backoff_factor is None or not (0 < backoff_factor < 1):
        return CALIBRATION_STREAK
    if not math.isfinite(init_scale) or init_scale <= 1:
        return CALIBRATION_STREAK
    needed = math.ceil(math.log(init_scale) / -math.log(backoff_factor) - 1e-9)  # 2**32 at 0.5: exactly 32
    return max(CALIBRATION_STREAK, needed)


@dataclass
class Alarm:
    code: str
    message: str


# What to change, said two ways: a preset's key for amptui's trainer, or the code to change for a
# run of the user's own loop (a script under the hooks, a Monitor), which has no preset keys.
FIXES = {
    "wide": ("use amp.dtype={wide}", "autocast to torch.{wide} in your loop (torch.autocast(..., "
             "dtype=torch.{wide}), no GradScaler needed)"),
    "lr": ("lower optim.lr", "lower your optimizer's learning rate"),
    "clip": ("enable amp.clip_grad_norm", "clip the gradients (scaler.unscale_(optimizer), then "
             "torch.nn.utils.clip_grad_norm_)"),
    "no_autocast": ("try amp.autocast=false", "run your loop once without torch.autocast"),
    "init_scale": ("lower amp.init_scale (the default is 65536, 2**16)", "give the GradScaler a lower init_scale "
                   "(torch's default is 65536, 2**16)"),
    "try_wide": ("try --set amp.dtype={wide}", "try torch.autocast(..., dtype=torch.{wide}) in your "
                 "loop, without the GradScaler"),
}


@dataclass
class ScaleAlarms:
    growth_interval: int
    dtype: str                  # the autocast dtype
    bf16_available: bool        # bfloat16 runs natively here (the wide-range alternative)
    init_scale: float | None = None     # the GradScaler's scale before its first step, where known
    backoff_factor: float | None = 0.5  # what a backoff multiplies the scale by
    raised: set[str] = field(default_factory=set)
    streak: int = 0
    last_growth_step: int = 0
    last_backoff_step: int = 0  # a streak is backoffs on consecutive steps
    backoffs_since_growth: int = 0
    grown_once: bool = False
    backoffs_after_growth: int = 0
    source: str = ""            # the latest first non-finite module named on a backoff
    source_where: str = ""      # where it went non-finite: "forward" or "backward"
    own_loop: bool = False      # the user's loop (script hooks, Monitor): advice names code, not preset keys

    def fix(self, what: str) -> str:
        """FIXES[what], phrased for this run: a preset key, or the change in the user's loop."""
        preset, loop = FIXES[what]
        said = (loop if self.own_loop else preset).format(wide=wide_dtype())
        if what == "wide" and not self.bf16_available:  # still the range fix, but never sold as fast
            said += " (slow on this device, as `amptui doctor` measures it)"
        return said

    @property
    def calibration_streak(self) -> int:
        """Backoffs in a row before the first growth that are still calibration (see calibration_streak)."""
        return calibration_streak(self.init_scale, self.backoff_factor)

    def _calibration_words(self, limit: int) -> str:
        start = f" from init_scale {fmt_scale(self.init_scale)}" if self.init_scale is not None else ""
        return f"calibration{start} is allowed {limit} backoffs in a row, and this streak used them all"

    @property
    def _narrow_range(self) -> bool:
        """A dtype that needs loss scaling (float16): its overflows are what bfloat16's range avoids."""
        return narrow(self.dtype)

    def _range_advice(self) -> str:
        """What fixes an activation out of the dtype's range: the wider dtype, or that layer's scale."""
        return f"{self.fix('wide')}, or scale that layer's init/output"

    def _forward_overflow(self, where: Any) -> bool:
        """A module's forward output went past a narrow dtype's range (float16): no loss scale
        touches activations, so that, and not the data or the scale, is the cause to name."""
        return where == "forward" and self._narrow_range

    def _streak_advice(self) -> str:
        """What to do about a backoff streak: a forward overflow is in the activations, which no
        loss scale touches; a gradient overflow may still be the scale's."""
        if self.source_where == "forward":
            return (f"The forward pass itself exceeds {self.dtype}'s range there, which no loss scale can fix: "
                    f"{self._range_advice()}")
        # the streak outlasted calibration: the scale went as low as init_scale allows, so a lower
        # init_scale cannot help; what overflows is the model's numbers
        return f"Check those layers' inputs and weights, {self.fix('lr')}, or {self.fix('wide')}"

    def _once(self, code: str, message: str, out: list[Alarm]) -> None:
        if code not in self.raised:
            self.raised.add(code)
            out.append(Alarm(code, message))

    def _loss_words(self, where: str, source: Mapping[str, Any] | None) -> str:
        """The loss_not_finite text. With a forward overflow of a narrow dtype found on that step (a
        range sample or replay), that is the cause: its advice comes first, the data's second."""
        data = f"check the data for NaN/inf, {self.fix('lr')}, or {self.fix('clip')}"
        if source and self._forward_overflow(source.get("where")):
            return (f"the loss is not finite (NaN or inf) {where} because {source.get('module', '?')}'s forward "
                    f"output exceeded {self.dtype}'s range (first non-finite: {nonfinite_text(source)}), which "
                    f"no loss scale can fix: {self._range_advice()}. If the loss stays non-finite after that, {data}")
        return (f"the loss is not finite (NaN or inf) {where}: this is not an overflow the GradScaler can fix. "
                f"{data[0].upper()}{data[1:]}" + (f"; {self.fix('no_autocast')} to see whether reduced precision "
                                                  "causes it" if self.dtype != "float32" else ""))  # float32: no autocast

    def no_step_trained(self, steps: int, skipped_total: int, scale: float | None, ended: bool = False) -> list[Alarm]:
        """The alarm for a run none of whose `steps` optimizer steps trained (the GradScaler skipped
        every one): from NO_STEP_TRAINED steps on, or at its end (`ended`) however few it had. A run
        that never trained is no calibration to wait out, whatever its init_scale allows."""
        out: list[Alarm] = []
        if steps <= 0 or skipped_total < steps or (steps < NO_STEP_TRAINED and not ended):
            return out
        start = f" from init_scale {self.init_scale:g}" if self.init_scale is not None else ""
        now = f", now {scale:g}" if scale is not None else ""
        calibrating = ""
        if self.init_scale is not None and self.calibration_streak > steps:
            calibrating = (f"Calibrating down{start} can take up to {self.calibration_streak} skipped steps; ")
        said = "no optimizer step trained" if ended else "no optimizer step has trained yet"
        self._once("no_step_trained", f"{said}: the GradScaler skipped all {steps} (inf/NaN gradients at every "
                   f"loss scale tried{start}{now}), so the weights never changed. {calibrating}"
                   f"{self.fix('init_scale')}; if the steps stay skipped below a scale of 1, the gradients "
                   "themselves hold inf/NaN", out)
        return out

    def observe(self, scaler_events: list[dict], last_step: int, scale: float | None,
                loss: float | None, loss_at: str | None = None,
                loss_source: Mapping[str, Any] | None = None, skipped_total: int | None = None) -> list[Alarm]:
        """Feed one step record's scaler events (growth/backoff) and values; get new alarms.
        `loss_at`: where a non-finite loss came from ("at step 7"; default: the record's step);
        `loss_source`: the first non-finite module found on that step or in the window, if any;
        `skipped_total`: the run's skipped steps so far (all of them: no step trained)."""
        out: list[Alarm] = []
        if skipped_total is not None:
            out += self.no_step_trained(last_step, skipped_total, scale)
        if loss is not None and not math.isfinite(loss):  # None: the window measured no loss (a script's)
            self._once("loss_not_finite", self._loss_words(loss_at or f"at step {last_step}", loss_source), out)
        for event in scaler_events:
            if event["event"] == "growth":
                self.streak = 0
                self.grown_once = True
                self.last_growth_step = event["step"]
                self.backoffs_since_growth = 0
                self.raised.discard("backoff_streak")
                continue
            if self.streak and event["step"] != self.last_backoff_step + 1:
                self.streak = 0  # a step trained in between: these backoffs are not in a row
            self.last_backoff_step = event["step"]
            self.streak += 1
            if event.get("first_nonfinite"):
                self.source = nonfinite_text(event["first_nonfinite"])
                self.source_where = event["first_nonfinite"].get("where")
            self.backoffs_since_growth += 1
            if self.grown_once:
                self.backoffs_after_growth += 1
            limit = BACKOFF_STREAK if self.grown_once else self.calibration_streak
            if self.streak >= limit and "backoff_streak" not in self.raised:
                names = ", ".join(event.get("overflow", [])[:3]) or "unknown parameters"
                if self._forward_overflow(self.source_where):  # inf flowed back to them: not their own range
                    names += " (upstream of the forward overflow)"
                blame = f"; first non-finite: {self.source}" if self.source else ""
                phase = ("not calibration: the scale had grown before and keeps falling with no growth" if self.grown_once
                         else self._calibration_words(limit))
                self._once("backoff_streak", f"{self.streak} optimizer steps in a row skipped (up to step "
                           f"{event['step']}), scale now {fmt_scale(event['new_scale'])} ({phase}): gradients overflow at "
                           f"every scale tried, in {names}{blame}. {self._streak_advice()}", out)
            if event["new_scale"] < 1.0:
                said = f"the loss scale fell below 1 ({fmt_scale(event['new_scale'])}) at step {event['step']}: the " \
                       "gradients hold inf/NaN even unscaled"
                if self._forward_overflow(self.source_where):  # the one cause the other alarms name too
                    said += (f", because the forward pass already exceeds {self.dtype}'s range (first non-finite: "
                             f"{self.source}), which no loss scale can fix: {self._range_advice()}")
                else:
                    said += (f", so scaling cannot fix them. Look for NaN in the loss or inputs, {self.fix('lr')}, "
                             f"or {self.fix('wide')}")
                self._once("scale_below_one", said, out)
        if scale is not None and self.backoffs_since_growth and \
                last_step - self.last_growth_step >= max(3 * self.growth_interval, STUCK_STEPS):
            self._once("scale_stuck", f"the loss scale has not grown for {last_step - self.last_growth_step} steps "
                       f"(stuck at {fmt_scale(scale)}): gradients overflow again before each growth_interval "
                       f"({self.growth_interval}) completes", out)
        if self._narrow_range and self.bf16_available and self.backoffs_after_growth >= REPEATED_OVERFLOWS:
            self._once("use_bfloat16", f"{self.dtype} overflowed {self.backoffs_after_growth} times after the scale "
                       f"settled: {wide_dtype()} runs fast on this device (as `amptui doctor` measures it) and has "
                       f"float32's range, so it needs no loss scaling; {self.fix('try_wide')}", out)
        return out


@dataclass
class HeadroomAlarms:
    """A layer whose range headroom stays under LOW_HEADROOM_BITS for LOW_HEADROOM_SAMPLES samples
    in a row will overflow soon; a sample that names a first non-finite module says where."""

    dtype: str
    low: dict[str, int] = field(default_factory=dict)   # layer -> consecutive low samples
    raised: set[str] = field(default_factory=set)

    def observe(self, samples: list[Any]) -> list[Alarm]:
        """Feed the window's `numerics` records (core.stream.records.Numerics); get new alarms."""
        out: list[Alarm] = []
        for sample in samples:
            source = (sample.first_nonfinite or {}).get("module")
            for layer in sample.layers:
                bits = layer_headroom(layer)
                name = layer.get("name", "?")
                if bits is None or bits >= LOW_HEADROOM_BITS:
                    self.low.pop(name, None)
                    continue
                if bits == -math.inf and name not in self.low and not _related(name, source):
                    continue  # inf/NaN that came in with its input from the named source: not its range
                # an overflowed sample (-inf) keeps the run going: a layer that swings between the
                # edge and past it is the one about to overflow for good
                self.low[name] = self.low.get(name, 0) + 1
                if self.low[name] >= LOW_HEADROOM_SAMPLES and name not in self.raised:
                    self.raised.add(name)
                    out.append(Alarm("low_headroom", self._advice(name, bits, sample.step)))
            out += self._probes(sample)
            first = sample.first_nonfinite
            if first and "nonfinite" not in self.raised:
                self.raised.add("nonfinite")
                out.append(Alarm("first_nonfinite", f"step {sample.step} overflowed; first non-finite: "
                                 f"{nonfinite_text(first)}"))
        return out

    def _probes(self, sample: Any) -> list[Alarm]:
        """Each layer a mode's probe finds in trouble (a GEMM output that lost too much, say),
        named once, with what to change (the probe's words)."""
        out = []
        for probe in probes():
            for entry in sample.get(probe.key) or []:
                name = f"{probe.key}:{entry.get('name', '?')}"
                if name not in self.raised and (said := probe.alarm(entry, sample.step)) is not None:
                    self.raised.add(name)
                    out.append(Alarm(probe.alarm_code, said))
        return out

    def _advice(self, name: str, bits: float, step: int) -> str:
        runs = f"{LOW_HEADROOM_SAMPLES} samples in a row under {LOW_HEADROOM_BITS:g}, up to step {step}"
        if bits == -math.inf:  # the latest sample overflowed: the narrow samples before it said so
            said = f"{name} has no range headroom left ({runs}, the last one inf/NaN): keeps overflowing {self.dtype}"
        else:
            said = f"{name} has {bits:.1f} bits of range headroom left ({runs}): will overflow {self.dtype} soon"
        if not narrow(self.dtype):  # float32's range (float32, bfloat16): no dtype is wider; the values diverge
            return (f"{said}: its values grow past float32's range, which no precision setting widens: lower the "
                    "learning rate, clip the gradients, or scale this layer's init/output")
        return f"{said}: {wide_dtype()}, or scale this layer's init/output"


def _related(name: str, source: Any) -> bool:
    """Whether a sampled layer is (or holds, or sits inside) the first non-finite module; True when
    none is named (then every overflowed layer may be the one)."""
    if not isinstance(source, str) or not source:
        return True
    return name == source or source.startswith(name + ".") or name.startswith(source + ".")
