"""Precision hygiene: silent precision mistakes, named live (no torch here).

The telemetry sampler (telemetry/hygiene.py) measures on sampled steps; this module says what the
numbers mean: each finding's warning code, its thresholds and its words (the layer or parameter,
the evidence, the fix). `runs` and `compare` count the findings by these codes.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

UPDATES_LOST = "updates_lost"              # 1: optimizer updates below half an ulp of the parameter's dtype
MASTER_16BIT = "master_weights_16bit"      # 2: 16-bit parameters or optimizer moments under a mixed setup
POLICY_IGNORED = "policy_ignored"          # 3: the linears compute in another dtype than asked
EPS_VANISHES = "eps_vanishes"              # 4: Adam's eps (or a norm's) lost in the dtype it is added in
GRAD_SCALE_WRONG = "grad_scale_wrong"      # 5: the optimizer sees gradients still scaled, or unscaled twice
LOSS_FLOAT16 = "loss_float16"              # 5: a loss computed in float16
CODES = (UPDATES_LOST, MASTER_16BIT, POLICY_IGNORED, EPS_VANISHES, GRAD_SCALE_WRONG, LOSS_FLOAT16)

LOST_SHARE = 0.5        # a parameter whose share of lost updates is at least this ...
LOST_SAMPLES = 3        # ... in each of its last LOST_SAMPLES samples is named
POLICY_SHARE = 0.5      # more than this share of the linears computing in another dtype: the policy does nothing
SCALE_BITS_MIN = 8      # a loss scale of at least 2**8 tells a factor of the scale from clipping or noise
SCALE_SLACK_BITS = 2.0  # the optimizer's gradient norm within this many bits of off-by-the-scale
SCALE_SAMPLES = 2       # consecutive samples that agree before it is said
NAMED = 3               # parameters or layers named in one message; the rest counted

TEXTS = {
    UPDATES_LOST: ("{names}: {share:.0%} of updates lost to {dtype} rounding over the last {samples} samples "
                   "(the optimizer's update was below half a unit in the last place of the {dtype} weight, so the "
                   "weight did not move){more}: keep float32 master weights (parameters float32 under autocast), "
                   "or use stochastic rounding"),
    MASTER_16BIT: ("master weights in {dtype} under {setup}: {share:.0%} of the parameters ({names}) are {what}, so "
                   "each update is rounded to {dtype} and small ones are lost; keep the parameters float32 "
                   "(no model.half() / model.to({dtype})) and let {fix} compute in {dtype} for you"),
    POLICY_IGNORED: ("asked {asked}, computed in {got} in {n} of {total} linears ({names}): the {source} does "
                     "nothing to them, so this run trains at {got}'s speed and memory; {fix}"),
    EPS_VANISHES: ("{where}: eps={eps:g} {why} in {dtype}, the dtype it is added in, so it no longer guards the "
                   "division; {fix}"),
    GRAD_SCALE_WRONG: ("the optimizer's gradients are {how} at step {step}: their norm is 2**{bits:+.0f} times the "
                       "unscaled gradient's, the loss scale being 2**{scale_bits:.0f}; {fix}"),
    LOSS_FLOAT16: ("the loss is computed in float16, outside autocast (whose float32 list keeps losses in float32): "
                   "a float16 reduction over a batch loses precision and overflows above 65504; compute it in "
                   "float32: loss_fn(output.float(), target), or keep the model float32 under autocast"),
}

SCALED_TWICE = ("the loss is scaled twice: scaler.scale() was given what scaler.scale() returned, so the gradients "
                "carry the loss scale squared and one unscale leaves them a loss scale too large (or inf, and "
                "every step skipped); call scaler.scale(loss).backward() once per loss")

SMALLEST_NORMAL = {"float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38, "float32": 1.1754943508222875e-38}
SMALLEST_SUBNORMAL = {"float16": 5.960464477539063e-08, "bfloat16": 9.183549615799121e-41, "float32": 1.401298464324817e-45}


def names_said(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


@dataclass
class LostUpdates:
    """Finding 1's memory: each parameter's share of lost updates over its last samples."""

    dtypes: dict[str, str]
    history: dict[str, deque] = field(default_factory=dict)

    def observe(self, shares: dict[str, float]) -> str | None:
        """One sample's shares (parameter -> lost / counted); the message once some parameter has been
        at LOST_SHARE or more in each of its last LOST_SAMPLES samples, else None."""
        for name, share in shares.items():
            self.history.setdefault(name, deque(maxlen=LOST_SAMPLES)).append(share)
        named = [(min(h), name) for name, h in self.history.items() if len(h) == LOST_SAMPLES and min(h) >= LOST_SHARE]
        if not named:
            return None
        named.sort(reverse=True)
        names = [name for _, name in named]
        worst = named[0][1]
        share = sum(self.history[worst]) / LOST_SAMPLES
        return TEXTS[UPDATES_LOST].format(names=names_said(names), share=share, dtype=self.dtypes[worst],
                                          samples=LOST_SAMPLES, more=f" (the first named; {len(names)} parameters in all)"
                                          if len(names) > 1 else "")


@dataclass
class ScaleCheck:
    """Finding 5: the optimizer's gradient norm against the unscaled gradient's, on sampled steps."""

    agreeing: int = 0
    last: str | None = None

    def observe(self, step: int, backward_sq: float, optimizer_sq: float, scale: float) -> str | None:
        """`backward_sq`: the sum of squares of the gradients as backward computed them (scaled by
        `scale`); `optimizer_sq`: as the optimizer saw them. The message after SCALE_SAMPLES samples
        that agree, else None."""
        if not (backward_sq > 0 and optimizer_sq > 0 and scale > 0) or not all(
                math.isfinite(v) for v in (backward_sq, optimizer_sq, scale)):
            return None
        scale_bits = math.log2(scale)
        if scale_bits < SCALE_BITS_MIN:
            self.agreeing, self.last = 0, None
            return None
        bits = 0.5 * math.log2(optimizer_sq / backward_sq) + scale_bits  # log2(optimizer norm / unscaled norm)
        if abs(bits - scale_bits) <= SCALE_SLACK_BITS:
            how = "still scaled"
            fix = ("step through the GradScaler (scaler.step(optimizer), which unscales first) or call "
                   "scaler.unscale_(optimizer) before optimizer.step()")
        elif abs(bits + scale_bits) <= SCALE_SLACK_BITS:
            how = "unscaled twice"
            fix = ("unscale once: scaler.unscale_(optimizer) (or scaler.step, which unscales) divides by the scale "
                   "already, so drop the loop's own division by the scale")
        else:
            self.agreeing, self.last = 0, None
            return None
        self.agreeing = self.agreeing + 1 if self.last == how else 1
        self.last = how
        if self.agreeing < SCALE_SAMPLES:
            return None
        return TEXTS[GRAD_SCALE_WRONG].format(how=how, step=step, bits=bits, scale_bits=scale_bits, fix=fix)


def adam_eps(eps: float, dtype: str, optimizer: str) -> str | None:
    """Finding 4 for an optimizer's eps added to its state's `dtype` (the denominator sqrt(v) + eps)."""
    tiny = SMALLEST_NORMAL.get(dtype)
    if tiny is None or not 0 < eps < tiny:
        return None
    why = ("is zero" if eps < SMALLEST_SUBNORMAL[dtype] / 2 else "is below the smallest normal value")
    return TEXTS[EPS_VANISHES].format(
        where=optimizer, eps=eps, why=why, dtype=dtype,
        fix=f"keep the optimizer state float32 (float32 parameters), or raise eps to at least {tiny:.2g}")


def norm_eps(module: str, eps: float, dtype: str) -> str:
    """Finding 4 for a norm whose eps vanished (its all-zero row gave a non-finite output)."""
    return TEXTS[EPS_VANISHES].format(
        where=f"{module} (a normalisation)", eps=eps, why="is zero (an all-zero row came out inf/NaN)", dtype=dtype,
        fix=f"compute the norm in float32 (x.float() before the mean, as torch's own norms do), or raise eps above "
            f"{SMALLEST_NORMAL.get(dtype, 0):.2g}")


def said(codes) -> list[str]:
    """Of a run's warning codes, the precision-hygiene findings, in CODES order."""
    return [code for code in CODES if code in codes]


def compare_notes(summaries) -> list[str]:
    """`compare`'s lines under the table: each run's precision-hygiene findings (a run that trained
    with a silent precision mistake is not AMP's verdict on the hardware)."""
    lines = []
    for s in summaries:
        found = said(s.warning_codes)
        if found:
            lines.append(f"warning: {s.run_id} has {len(found)} precision-hygiene finding{'s' if len(found) > 1 else ''} "
                         f"({', '.join(found)}): it trained with a silent precision mistake (amptui watch "
                         f"{s.run_id} shows each; docs/numerics.md#precision-hygiene)")
    return lines
