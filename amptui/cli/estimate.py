"""How long an A/B will take, said before it starts (`amptui ab` prints it; `amptui ab --estimate`
prints only it, which is how the dashboard's `a` asks before it starts anything).

The basis is each variant timed here just now (trainer/steptime.py): a few steady steps after a
warm-up one, one validation batch, building the model and data, and this process's own start-up
(each run of the A/B is a process that imports torch again). Said as a range with its basis
("from 5 steps of each at load 6.1 on 2 cores"): the spread of the timed steps widens it, and so
does a busy machine (timings taken at a load above the cores change as the load does).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from amptui.core.fmt import fmt_duration
from amptui.jobs.ab import LONG_AB_S as LONG_S

SHORTER_TARGET_S = 120  # the shorter setting offered: run.max_steps so that it ends within this


def process_age_s() -> float:
    """Seconds since this process started (its interpreter and imports: what each run of the A/B
    spends before its first step too); 0 where /proc cannot say."""
    try:
        with open("/proc/self/stat") as fh:
            started_ticks = int(fh.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def load_now() -> tuple[float | None, int]:
    from amptui.machine.busy import usable_cores

    try:
        return os.getloadavg()[0], usable_cores()
    except (OSError, AttributeError):
        return None, usable_cores()


def margins(spread: float, load: float | None, cores: int) -> tuple[float, float]:
    """(share below, share above) the point estimate: the timed steps' spread, and on a machine
    loaded beyond its cores, room for the load to change (more above: a busy machine slows). The load
    can also drop before the runs: a low bound said too high is worse than a wide range (an A/B timed
    at load 5.3 on 2 cores ran in 13.4 s against a low bound of 13.6 s)."""
    excess = max(0.0, (load or 0.0) / cores - 1.0)
    return min(0.7, 0.25 + spread / 2 + 0.25 * excess), 0.35 + spread + 0.5 * excess


def ab_estimate(preset, overrides: dict[str, Any], variants: list[tuple[str, dict[str, object]]]) -> dict[str, Any]:
    """{"kind": "estimate", "low_s", "high_s", "variants": [{"variant", "step_s", "steps", "timed"}],
    "basis": {"steps", "load", "cores"}, "shorter_steps", "words"}."""
    from amptui.jobs import launch
    from amptui.trainer.steptime import time_steps

    start_up = process_age_s()
    load, cores = load_now()
    timed: list[dict[str, Any]] = []
    total = overhead = 0.0
    spreads = []
    for name, variant in variants:
        began = time.perf_counter()
        t = time_steps(launch.resolve_config(preset, {**overrides, **variant}))
        median = statistics.median(t.step_s)
        spreads.append((max(t.step_s) - min(t.step_s)) / median if median > 0 else 0.0)
        fixed = start_up + t.setup_s + t.first_s + t.evals * t.eval_s
        overhead += fixed
        total += fixed + max(0, t.steps - 1) * median
        timed.append({"variant": name, "step_s": median, "steps": t.steps, "timed": len(t.step_s),
                      "measured_s": round(time.perf_counter() - began, 3)})
    below, above = margins(max(spreads, default=0.0), load, cores)
    found: dict[str, Any] = {"kind": "estimate", "low_s": total * (1 - below), "high_s": total * (1 + above),
                             "variants": timed, "basis": {"steps": min(t["timed"] for t in timed),
                                                          "load": load, "cores": cores},
                             "overhead_s": overhead, "above": above}
    found["shorter_steps"] = shorter_steps(found)
    found["words"] = estimate_words(found)
    return found


def shorter_steps(found: dict[str, Any]) -> int:
    """run.max_steps for an A/B that ends within about SHORTER_TARGET_S (at least 10 steps)."""
    per_step = sum(t["step_s"] for t in found["variants"]) * (1 + found.get("above", 0.5))
    left = SHORTER_TARGET_S - found.get("overhead_s", 0.0)
    return max(10, int(left / per_step)) if per_step > 0 else 10


def estimate_words(found: dict[str, Any]) -> str:
    timed = found["variants"]
    steps = sorted({t["steps"] for t in timed})
    each = " or ".join(str(s) for s in steps)
    rates = ", ".join(f"{t['variant']} {t['step_s']:.2g} s" for t in timed)
    basis = found["basis"]
    load = "" if basis["load"] is None else f" at load {basis['load']:.1f} on {basis['cores']} cores"
    return (f"about {span(found['low_s'], found['high_s'])} for {len(timed)} variant{'s' if len(timed) > 1 else ''} x {each} steps "
            f"(from {basis['steps']} step{'s' if basis['steps'] > 1 else ''} of each timed here just now{load}: {rates} a step; start-up and "
            "evaluation counted; a busier machine takes longer)")


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
