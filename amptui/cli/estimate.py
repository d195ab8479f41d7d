"""How long an A/B will take, said before it starts (`amptui ab` prints it; `amptui ab --estimate`
prints only it, which is how the dashboard's `a` asks before it starts anything).

The basis is one training step of each variant, timed here just now (trainer/steptime.py), times
the run's steps. Given as a range: the timed step may be slower than the steady ones (first-step
set-up) or faster than the real ones (evaluation and checkpoints are not timed, the machine may
get busier), so from half to one and a half times the product.
"""

from __future__ import annotations

from typing import Any

from amptui.core.fmt import fmt_duration
from amptui.jobs.ab import LONG_AB_S as LONG_S

SHORTER_TARGET_S = 120  # the shorter setting offered: run.max_steps so that it ends within this
LOW, HIGH = 0.5, 1.5


def ab_estimate(preset, overrides: dict[str, Any], variants: list[tuple[str, dict[str, object]]]) -> dict[str, Any]:
    """{"kind": "estimate", "low_s", "high_s", "variants": [{"variant", "step_s", "steps"}], "words"}."""
    from amptui.jobs import launch
    from amptui.trainer.steptime import time_step

    timed: list[dict[str, Any]] = []
    total = 0.0
    for name, variant in variants:
        step_s, steps = time_step(launch.resolve_config(preset, {**overrides, **variant}))
        timed.append({"variant": name, "step_s": step_s, "steps": steps})
        total += step_s * steps
    found: dict[str, Any] = {"kind": "estimate", "low_s": LOW * total, "high_s": HIGH * total, "variants": timed}
    found["shorter_steps"] = shorter_steps(found)
    found["words"] = estimate_words(found)
    return found


def shorter_steps(found: dict[str, Any]) -> int:
    """run.max_steps for an A/B that ends within about SHORTER_TARGET_S (at least 10 steps)."""
    per_step = sum(t["step_s"] for t in found["variants"]) * HIGH
    return max(10, int(SHORTER_TARGET_S / per_step)) if per_step > 0 else 10


def estimate_words(found: dict[str, Any]) -> str:
    timed = found["variants"]
    steps = sorted({t["steps"] for t in timed})
    each = " or ".join(str(s) for s in steps)
    rates = ", ".join(f"{t['variant']} {t['step_s']:.2g} s" for t in timed)
    return (f"about {span(found['low_s'], found['high_s'])} for {len(timed)} variants x {each} steps "
            f"(one step of each timed here just now: {rates}; evaluation and checkpoints not counted)")


def span(low: float, high: float) -> str:
    """"20-60 min", "40 s-2 min", "1:05-3:10 h"."""
    def one(s: float) -> str:
        if s < 90:
            return f"{s:.0f} s"
        if s < 5400:
            return f"{s / 60:.0f} min"
        return f"{fmt_duration(s)} h"
    a, b = one(low), one(high)
    for unit in (" s", " min"):
        if a.endswith(unit) and b.endswith(unit):
            return f"{a[:-len(unit)]}-{b}"
    return f"{a}-{b}"


def ab_estimate_or_why(preset, overrides: dict[str, Any], variants: list[tuple[str, dict[str, object]]]
                       ) -> dict[str, Any]:
    """The estimate, or {"kind": "estimate", "error", "words": "none (why)"} where a step could not be
    timed (the A/B may still run: an estimate is advice). A refusal (UserError) is the A/B's own."""
    from amptui.core.errors import UserError

    planned = preset.config(overrides)
    if planned.model.factory or planned.data.factory:  # never run the user's code only to time it
        why = "a model or data factory of your own is not run just to time a step"
        return {"kind": "estimate", "error": why, "words": f"none ({why})"}
    try:
        return ab_estimate(preset, overrides, variants)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - advice only: said, never in the A/B's way
        return {"kind": "estimate", "error": f"{type(exc).__name__}: {exc}",
                "words": f"none (one step could not be timed here: {type(exc).__name__}: {exc})"}


def said_before_start(preset, overrides: dict[str, Any], variants: list[tuple[str, dict[str, object]]]) -> str:
    """The line `amptui ab` prints before its first variant starts (never fails the A/B)."""
    try:
        found = ab_estimate_or_why(preset, overrides, variants)
    except Exception as exc:  # noqa: BLE001 - an estimate is advice: the A/B itself says what is wrong
        return f"estimate: none ({type(exc).__name__}: {exc})"
    if "error" in found:
        return f"estimate: {found['words']}"
    return (f"estimate: {found['words']}; Ctrl-C stops it"
            + (f"; shorter: --set run.max_steps={found['shorter_steps']}" if found["high_s"] > LONG_S else ""))
