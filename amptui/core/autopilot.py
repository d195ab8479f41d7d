"""The precision autopilot's rules: they read the step records a run writes anyway (so they cost the
training step nothing) and decide when its precision should change, with the evidence.

    pilot = Pilot(settings, precision="fp16+scaler", wide_fast=True)
    decision = pilot.observe(step_record)      # None, or what `act` does / `advise` says, once

The trainer acts on a Decision at a checkpoint (trainer/autopilot.py); `advise`, and every run of a
user's own loop (amptui does not own a script's loop), only says it. No torch here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from amptui.core.config.autopilot import Autopilot
from amptui.core.fmt import fmt_scale

HISTORY = 32  # the (step, scale, skipped) records a decision keeps as its evidence


@dataclass(frozen=True)
class Decision:
    rule: str
    step: int                       # the step record that fired it: the switch's checkpoint is here
    to: dict[str, Any]              # the preset keys the switch sets ({"amp.dtype": "bfloat16", ...})
    to_words: str                   # "bf16"
    why: str                        # "the scale stayed below 1 for 50 steps"
    evidence: dict[str, Any] = field(default_factory=dict)

    def advice(self, from_words: str, own_loop: bool = False) -> str:
        """What `advise` says (a script's run: the change to make in its loop)."""
        how = (" (torch.autocast(..., dtype=torch.bfloat16), no GradScaler)" if own_loop
               else f" (--set {' --set '.join(f'{k}={_toml(v)}' for k, v in self.to.items())})")
        return f"autopilot: would switch {from_words} -> {self.to_words} at step {self.step}: {self.why}{how}"

    def done(self, from_words: str, step: int) -> str:
        return f"autopilot: switched {from_words} -> {self.to_words} at step {step}: {self.why} (rule {self.rule})"


def _toml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class ScaleCollapse:
    """Rule 1: float16 + GradScaler -> bfloat16 when the scale collapses: below `scale_floor` for
    `floor_steps` steps, or `skip_limit` skipped steps within `skip_window` steps. The backoffs before
    the first clean step are the scaler's calibration, not counted as skips (a run that never has a
    clean step collapses below the floor instead)."""

    settings: Autopilot
    below_since: int | None = None
    clean_seen: bool = False
    last_step: int = 0
    skips: deque = field(default_factory=deque)           # (step, skipped) of the records in the window
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))

    def observe(self, step: int, scale: float | None, skipped: int) -> str | None:
        """Why the rule fires at this step record, or None."""
        s = self.settings
        steps = max(1, step - self.last_step)
        self.last_step = step
        self.history.append([step, scale, skipped])
        if scale is None:
            return None
        if self.clean_seen and skipped:
            self.skips.append((step, skipped))
        if skipped < steps:
            self.clean_seen = True  # from the next record on, skips count (this one's may be calibration's end)
        while self.skips and self.skips[0][0] <= step - s.skip_window:
            self.skips.popleft()
        if scale < s.scale_floor:
            self.below_since = step - steps + 1 if self.below_since is None else self.below_since
        else:
            self.below_since = None
        if self.below_since is not None and step - self.below_since + 1 >= s.floor_steps:
            return f"the scale stayed below {fmt_scale(s.scale_floor)} for {step - self.below_since + 1} steps " \
                   f"(now {fmt_scale(scale)})"
        skipped_in_window = sum(n for _, n in self.skips)
        if skipped_in_window >= s.skip_limit:
            return f"{skipped_in_window} steps skipped in the last {s.skip_window} (scale now {fmt_scale(scale)})"
        return None

    def evidence(self) -> dict[str, Any]:
        s = self.settings
        return {"scale_history": [list(h) for h in self.history], "scale_floor": s.scale_floor,
                "floor_steps": s.floor_steps, "below_since": self.below_since,
                "skipped_in_window": sum(n for _, n in self.skips), "skip_limit": s.skip_limit,
                "skip_window": s.skip_window}


class Pilot:
    """The rules of one run, fed its step records in order; each decides at most once."""

    def __init__(self, settings: Autopilot, *, narrow_scaled: bool, wide: str = "bfloat16", wide_fast: bool = True):
        self.settings = settings
        self.wide, self.wide_fast = wide, wide_fast
        self.collapse = ScaleCollapse(settings) if narrow_scaled and "scale_collapse" in settings.rules else None
        self.decided: list[Decision] = []
        self.held_back: str | None = None  # a rule fired where its target is slow: said once, not acted on

    def observe(self, record: Mapping[str, Any]) -> Decision | None:
        step, scale, skipped = record.get("step"), record.get("scale"), record.get("skipped") or 0
        if not isinstance(step, int) or self.collapse is None or self.decided or self.held_back:
            return None
        why = self.collapse.observe(step, scale if isinstance(scale, (int, float)) else None, int(skipped))
        if why is None:
            return None
        if not self.wide_fast:
            self.held_back = (f"autopilot: the scale collapsed at step {step} ({why}), but {self.wide} is slow on "
                              "this device (as `amptui doctor` measures it): not switching")
            return None
        decision = Decision("scale_collapse", step, {"amp.dtype": self.wide, "amp.grad_scaler": False},
                            _short(self.wide), why, self.collapse.evidence())
        self.decided.append(decision)
        return decision


def _short(dtype: str) -> str:
    from amptui.core.config.precision import DTYPES

    found = DTYPES.get(dtype)
    return found.short if found is not None else dtype


def segments(switches: Sequence[Mapping[str, Any]]) -> str:
    """A run's precision as its segments, from its precision_switch records: "fp16+scaler -> bf16 at step
    1200" ("" without a switch)."""
    parts: list[str] = []
    for rec in switches:
        source, to = rec.get("from"), rec.get("to")
        before = source.get("short") if isinstance(source, Mapping) else None
        after = to.get("short") if isinstance(to, Mapping) else None
        if not parts:
            parts.append(str(before or "?"))
        parts.append(f"{after or '?'} at step {rec.get('step')}")
    return " -> ".join(parts)
