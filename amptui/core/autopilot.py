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
from amptui.core.run.runstate import segments

HISTORY = 32  # the (step, scale, skipped) records a decision keeps as its evidence
DECAY_TOLERANCE = 1e-6  # float8_tail's decay onset: an lr this much (relative) under its peak (not its rounding)


@dataclass(frozen=True)
class Decision:
    rule: str
    step: int                       # the step record that fired it: the switch's checkpoint is here
    to: dict[str, Any]              # the preset keys the switch sets ({"amp.dtype": "bfloat16", ...})
    to_words: str                   # "bf16"
    why: str                        # "the scale stayed below 1 for 50 steps"
    evidence: dict[str, Any] = field(default_factory=dict)
    layers: tuple[str, ...] = ()    # the modules whose precision it changes; (): the whole model

    def advice(self, from_words: str, own_loop: bool = False) -> str:
        """What `advise` says (a script's run: the change to make in its loop)."""
        how = (" (torch.autocast(..., dtype=torch.bfloat16), no GradScaler)" if own_loop
               else f" (--set {' --set '.join(f'{k}={_toml(v)}' for k, v in self.to.items())})")
        return f"autopilot: would switch {from_words} -> {self.to_words} at step {self.step}: {self.why}{how}"

    def done(self, from_words: str, step: int) -> str:
        return f"autopilot: switched {from_words} -> {self.to_words} at step {step}: {self.why} (rule {self.rule})"


def _toml(value: Any, inner: bool = False) -> str:
    """A --set value as TOML: true, bfloat16 (a bare word --set takes), ['a'], {"a" = 'b'}."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"\"{k}\" = {_toml(v, True)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v, True) for v in value) + "]"
    return f"'{value}'" if isinstance(value, str) and (inner or not value.replace("_", "").isalnum()) else str(value)


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
    held: bool = False                                    # it fired where bfloat16 is slow: said, not acted on
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


@dataclass
class Float8Sqnr:
    """Rule 2: a float8 linear back to high precision (amp.float8_skip) once `sqnr_alarms` range samples
    found its float8 GEMM output under `sqnr_db` above its rounding error; the others stay float8."""

    settings: Autopilot
    low: dict[str, list[list[Any]]] = field(default_factory=dict)  # layer -> [[step, sqnr_db], ...] under the bar

    def observe(self, record: Mapping[str, Any]) -> tuple[str, str] | None:
        """(the layer, why) when a numerics record makes a layer's count, else None."""
        step = record.get("step")
        for layer in record.get("float8") or []:
            if not isinstance(layer, Mapping):
                continue
            name, sqnr = layer.get("name"), layer.get("sqnr_db")
            if not isinstance(name, str) or not isinstance(sqnr, (int, float)) or sqnr >= self.settings.sqnr_db:
                continue
            seen = self.low.setdefault(name, [])
            if isinstance(step, int):  # a rewind's redone steps (trainer/autopilot.py) count once: the newer sample
                seen[:] = [s for s in seen if not isinstance(s[0], int) or s[0] < step]
            seen.append([step, round(float(sqnr), 2)])
            if len(seen) >= self.settings.sqnr_alarms:
                return name, (f"{name}'s float8 {layer.get('recipe', '')} GEMM output stayed under "
                              f"{self.settings.sqnr_db:g} dB SQNR in {len(seen)} samples (last {sqnr:.1f} dB)")
        return None


def kept_out(amp_cfg: Any) -> list[str] | None:
    """What rule float8_sqnr starts from in amptui's trainer: a float8 run's linears kept in high
    precision (amp.float8_skip); None when the run converts none by its own keys (the rule is off)."""
    if getattr(amp_cfg, "float8", "off") == "off":
        return None
    return list(getattr(amp_cfg, "float8_skip", []))


class Pilot:
    """The rules of one run, fed its records in order; each rule decides at most once (a switch builds a new Pilot)."""

    def __init__(self, settings: Autopilot, *, narrow_scaled: bool, wide: str = "bfloat16", wide_fast: bool = True,
                 float8_skip: Sequence[str] | None = None, layers: Mapping[str, str] | None = None, widened: int = 0,
                 total_steps: int | None = None, roof: Any = None, roof_why: str | None = None,
                 fired_before: Sequence[str] = ()):
        self.settings = settings
        self.wide, self.wide_fast = wide, wide_fast
        self.collapse = ScaleCollapse(settings) if narrow_scaled and "scale_collapse" in settings.rules else None
        # a float8 run's linears ([amp] float8 on): `float8_skip` is what it keeps in high precision already
        self.float8_skip = list(float8_skip) if float8_skip is not None else None
        self.sqnr = Float8Sqnr(settings) if float8_skip is not None and "float8_sqnr" in settings.rules else None
        self.decided: list[Decision] = []
        # widen_overflow and promote: amptui's trainer's [amp.layers] (None: not its run), and how many modules
        # earlier switches widened
        self.layers = dict(layers) if layers is not None else None
        self.widened = widened
        self.total_steps = total_steps  # float8_tail: the run's steps (amptui's trainer knows them)
        self.peak_lr: float | None = None  # float8_tail with tail_on_decay: the highest lr the step records showed
        self.plan_samples: list[Mapping[str, Any]] = []  # promote: the run's plan_sample records so far
        # promote_for = "here": the run's device's measured roof (built where torch is), or why there is none
        self.roof, self.roof_why = roof, roof_why
        self.fired_before = tuple(fired_before)  # the rules earlier switches of this run fired (promote: once a run)
        self.held_back: str | None = None  # a rule that fired but is not acted on (its target slow here): why

    def _fired(self, rule: str) -> bool:
        return any(d.rule == rule for d in self.decided)

    def _promoting(self) -> bool:
        return self.layers is not None and bool(self.settings.promote_after) and "promote" in self.settings.rules \
            and not self._fired("promote") and "promote" not in self.fired_before

    def observe_warning(self, record: Mapping[str, Any]) -> Decision | None:
        """A `warning` record: a non-finite step whose triage names `precision_overflow` in a module (rule
        widen_overflow): that module computes in float32 from here, up to `widen_limit` modules a run."""
        cause = record.get("cause")
        if self.layers is None or "widen_overflow" not in self.settings.rules or \
                record.get("code") != "nonfinite_cause" or not isinstance(cause, Mapping):
            return None
        module, step = cause.get("module"), cause.get("step")
        if cause.get("cause") != "precision_overflow" or not isinstance(module, str) or not module or \
                not isinstance(step, int) or self.layers.get(module) == "fp32" or self._fired("widen_overflow"):
            return None
        if self.widened >= self.settings.widen_limit:
            self.held_back = (f"autopilot: {module} overflowed {cause.get('dtype', '')} at step {step}, but "
                              f"{self.widened} modules were widened already (widen_limit): not switching")
            return None
        decision = Decision("widen_overflow", step, {"amp.layers": {**self.layers, module: "fp32"}}, f"{module} in fp32",
                            f"step {step}: {module}'s {cause.get('where', 'forward')} output passed "
                            f"{cause.get('dtype', 'the dtype')}'s range with finite inputs (precision_overflow)",
                            {"cause": dict(cause), "widened_before": self.widened}, (module,))
        self.decided.append(decision)
        return decision

    def observe_numerics(self, record: Mapping[str, Any]) -> Decision | None:
        """A `numerics` record (a range sample with its float8 layers' SQNR): rule float8_sqnr."""
        if self.sqnr is None or self._fired("float8_sqnr") or self.float8_skip is None:
            return None
        fired = self.sqnr.observe(record)
        if fired is None:
            return None
        layer, why = fired
        decision = Decision("float8_sqnr", int(record.get("step") or 0), {"amp.float8_skip": [*self.float8_skip, layer]},
                            f"{layer} out of float8", why, {"sqnr_db": self.settings.sqnr_db,
                                                            "samples": self.sqnr.low[layer], "layer": layer},
                            (layer,))
        self.decided.append(decision)
        return decision

    def observe(self, record: Mapping[str, Any]) -> Decision | None:
        """A step record: rules float8_tail and scale_collapse."""
        return self._tail(record) or self._promote(record) or self._collapse(record)

    def _tail(self, record: Mapping[str, Any]) -> Decision | None:
        """Rule 4: a float8 run's linears back to high precision (amp.float8 = "off") for the last
        `tail_share` of its steps (0: off), from the first step record past that point; with `tail_on_decay`,
        from the lr's decay onset if that comes first: the first step record whose lr is under the highest
        an earlier record showed (the end of a constant phase, a plateau's first drop, cosine's warm-up end)."""
        step, share, total, lr = record.get("step"), self.settings.tail_share, self.total_steps, record.get("lr")
        if self.float8_skip is None or "float8_tail" not in self.settings.rules or self._fired("float8_tail") or \
                not isinstance(step, int):
            return None
        peak, decaying = self.peak_lr, False
        if self.settings.tail_on_decay and isinstance(lr, (int, float)) and not isinstance(lr, bool):
            decaying = peak is not None and lr < peak * (1 - DECAY_TOLERANCE)
            self.peak_lr = lr if peak is None else max(peak, lr)
        if decaying and peak is not None and isinstance(lr, (int, float)):
            decision = Decision("float8_tail", step, {"amp.float8": "off"}, "float8 off",
                                f"the lr began to decay by step {step} ({lr:.3g}, under its peak {peak:.3g}): the rest "
                                "of the run in high precision", {"tail_on_decay": True, "lr": lr, "peak_lr": peak,
                                                                 "total_steps": total})
        elif share and total and step >= total * (1 - share):
            decision = Decision("float8_tail", step, {"amp.float8": "off"}, "float8 off",
                                f"the last {share:.0%} of the run's {total} steps (from step {step}) in high precision",
                                {"tail_share": share, "total_steps": total})
        else:
            return None
        self.decided.append(decision)
        return decision

    def observe_plan(self, record: Mapping[str, Any]) -> None:
        """A `plan_sample` record (numerics.plan_every): kept for rule promote."""
        if self._promoting():
            self.plan_samples.append(record)

    def _promote(self, record: Mapping[str, Any]) -> Decision | None:
        """Rule 3: at the first step record from `promote_after` on, the linears `amptui plan`'s rules
        (core/planning/plan.py) find safe and gaining on `promote_for`'s roofline, from this run's plan samples,
        move to that float8 recipe; the others (and the layers [amp.layers] already names) stay."""
        step = record.get("step")
        if not self.plan_samples or self.layers is None or not self._promoting() or \
                not isinstance(step, int) or step < self.settings.promote_after:
            return None
        from amptui.core.config.autopilot import HERE
        from amptui.core.planning.plan import make_plan
        from amptui.core.planning.roofline import roof_for

        roof = self.roof if self.settings.promote_for == HERE else roof_for(self.settings.promote_for)
        if roof is None:
            self.decided.append(Decision("promote", step, {}, "", "no roof"))  # once: said, not acted on
            self.held_back = f"autopilot: no layer promoted at step {step}: {self.roof_why or 'no roofline here'}"
            return None
        plan = make_plan(self.plan_samples, roof)
        chosen = {x.name: x.choice for x in plan.float8_layers if x.name not in self.layers}
        kept = {x.name: x.reason for x in plan.layers if x.name not in chosen}
        decision = Decision("promote", step, {"amp.layers": {**self.layers, **chosen}},
                            f"{len(chosen)} layers to float8",
                            f"after {step} steps, {len(chosen)} of {len(plan.layers)} linears safe and gaining on "
                            f"{plan.device.name} ({', '.join(chosen) or 'none'})",
                            {"promoted": chosen, "kept": kept, "samples": plan.samples, "for": plan.device.name},
                            tuple(chosen))
        self.decided.append(decision)
        return decision if chosen else None

    def _collapse(self, record: Mapping[str, Any]) -> Decision | None:
        step, scale, skipped = record.get("step"), record.get("scale"), record.get("skipped") or 0
        if not isinstance(step, int) or self.collapse is None or self._fired("scale_collapse") or self.collapse.held:
            return None
        why = self.collapse.observe(step, scale if isinstance(scale, (int, float)) else None, int(skipped))
        if why is None:
            return None
        if not self.wide_fast:
            self.collapse.held = True
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


WHOLE_MODEL = "*"  # a precision_switch side's `layers` key for a switch of the whole model


def layer_precisions(precision: Any, values: Mapping[str, Any], layers: Sequence[str]) -> dict[str, str]:
    """A precision_switch side's `layers`: each module the switch changes with its precision on that side
    (as [amp.layers] and amp.float8 give it, else the run's autocast dtype); {"*": short} for the whole model.
    `precision` is the side's core.config.precision.Precision, `values` its flat config."""
    from amptui.core.config.layers import rule_for
    from amptui.core.config.precision import FULL_DTYPE

    if not layers:
        return {WHOLE_MODEL: precision.short}
    table = tuple((str(k), str(v)) for k, v in (values.get("amp.layers") or {}).items())
    float8, skip = values.get("amp.float8") or "off", set(values.get("amp.float8_skip") or ())
    base = _short(precision.dtype) if precision.autocast else FULL_DTYPE.short
    return {name: rule_for(name, table) or (f"fp8 {float8}" if float8 != "off" and name not in skip else base)
            for name in layers}


def switch_layers(rec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A precision_switch record's (from, to) `layers`. A record written before `layers` existed has only the
    preset `keys`: the modules they name ([amp.layers], the last of amp.float8_skip) stand for it, else "*"."""
    sides = []
    for side in (rec.get("from"), rec.get("to")):
        side = side if isinstance(side, Mapping) else {}
        layers = side.get("layers")
        if not isinstance(layers, Mapping):
            layers = {WHOLE_MODEL: side.get("short", "?")}
        sides.append(dict(layers))
    if all(WHOLE_MODEL in s for s in sides):  # an old record: its keys say which modules changed
        keys = [s.get("keys") if isinstance(s, Mapping) else None for s in (rec.get("from"), rec.get("to"))]
        after = keys[1] if isinstance(keys[1], Mapping) else {}
        before = keys[0] if isinstance(keys[0], Mapping) else {}
        table, old = after.get("amp.layers"), before.get("amp.layers") or {}
        skip = after.get("amp.float8_skip")
        if isinstance(table, Mapping) and isinstance(old, Mapping):
            changed = [k for k in table if table[k] != old.get(k)]
            return {k: old.get(k, "?") for k in changed}, {k: table[k] for k in changed}
        if isinstance(skip, list) and skip:
            return {str(skip[-1]): "fp8"}, {str(skip[-1]): "high precision"}
    return sides[0], sides[1]


def switch_line(rec: Mapping[str, Any]) -> str:
    """A precision_switch record in one line: "autopilot: switched fp16+scaler -> bf16 at step 35: why (rule R)",
    with the modules it changed when not the whole model ("outlier fp8 tensorwise -> bf16")."""
    source, to = switch_layers(rec)
    moved = "; ".join(f"{name} {source.get(name, '?')} -> {after}" for name, after in to.items() if name != WHOLE_MODEL)
    return (f"autopilot: switched {segments([rec])}: {rec.get('why', '')} (rule {rec.get('rule', '?')})"
            + (f" [{moved}]" if moved else ""))
