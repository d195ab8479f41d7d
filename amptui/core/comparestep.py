"""Runs set side by side at one step (core/compare.py's table): the last step every run reached,
each run's loss there (read again from its events where it went further), whether it stopped
early, and the noise on a speed-up from the runs' step-time spread."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.core.events import EventReader, primary_events_file
from amptui.core.records import Step

if TYPE_CHECKING:
    from amptui.core.compare import RunSummary

_CHUNK = 8 * 1024 * 1024
# A speed-up's noise: the two runs' window-to-window spread of ms/step (one standard deviation of
# each, relative, combined), never below SPEED_NOISE_FLOOR: one machine's run-to-run wobble.
# A speed-up within 1 +- its noise reads "same speed".
SPEED_NOISE_FLOOR = 0.02
# Beyond this relative noise a speed-up is not a figure ("too noisy to tell").
NOISE_TOO_LARGE = 0.5
# Runs whose windows saw other processes take shares of the CPUs this far apart ran under different
# load: their speed-up measures the machine, not the precision.
LOAD_GAP = 0.2


def loss_at(run_dir: Path | None, step: int) -> tuple[int, float] | None:
    """(the step, its loss) of the run's last step record at or before `step`, read again from its
    events (a second pass, only for runs that went further than the others); a resumed session's
    record of a step replaces the first session's."""
    if run_dir is None:
        return None
    found: tuple[int, float] | None = None
    reader = EventReader(primary_events_file(run_dir))
    while batch := reader.read(_CHUNK):
        for rec in batch:
            if not isinstance(rec, Step):
                continue
            at, loss = rec.step, rec.loss
            if (isinstance(at, int) and isinstance(loss, (int, float))
                    and at <= step and (found is None or at >= found[0])):
                found = (at, float(loss))
    return found


def never_stepped(s: RunSummary) -> bool:
    """Ended without a step record (a variant that failed at step 0): listed, left out of the common step."""
    return s.ended and s.step <= 0


def common_step(summaries: list[RunSummary]) -> int | None:
    """The last step every run that trained reached (None when a run still going has no step yet,
    or none trained); a run that ended before its first step does not hold the others at None."""
    steps = [s.step for s in summaries if not never_stepped(s)]
    return min(steps) if steps and min(steps) > 0 else None


def losses_at(summaries: list[RunSummary], step: int | None) -> list[tuple[int, float] | None]:
    """Each run's loss at `step` (the common step): its last loss where it stopped there, else
    read again from its events."""
    if step is None:
        return [None for _ in summaries]
    return [None if never_stepped(s) else (s.step, float(s.loss)) if s.step == step and isinstance(s.loss, (int, float)) else loss_at(s.run_dir, step)
            for s in summaries]


def speed_noise(s: RunSummary, base: RunSummary) -> float | None:
    """The relative noise of a speed-up of `s` against `base` (see SPEED_NOISE_FLOOR); None when
    either run has fewer than two timed windows after warm-up."""
    if s.step_ms_spread is None or base.step_ms_spread is None:
        return None
    return max(SPEED_NOISE_FLOOR, math.hypot(s.step_ms_spread, base.step_ms_spread))


def stopped_early(s: RunSummary) -> bool:
    """Ended (stopped, killed, failed) before the steps it was set to run."""
    return s.ended and s.status != "completed" and bool(s.total_steps) and s.step < (s.total_steps or 0)


@dataclass(frozen=True)
class SpeedVerdict:
    """What a speed-up of `s` against `base` may be said as: plus (the +- shown), same (within its
    noise of 1.0: symmetric, |ln speed-up| <= ln(1 + noise), so A against B and B against A agree)
    and why it cannot be told at all (None when it can)."""

    plus: float | None = None
    same: bool | None = None
    unresolved: str | None = None


def speed_verdict(s: RunSummary, base: RunSummary, speedup: float | None) -> SpeedVerdict:
    if s is base or speedup is None or speedup <= 0:
        return SpeedVerdict()
    noise = speed_noise(s, base)
    plus = speedup * noise if noise is not None else None
    if s.others_cpu is not None and base.others_cpu is not None and abs(s.others_cpu - base.others_cpu) > LOAD_GAP:
        return SpeedVerdict(plus, None, f"ran under different load (other processes used {base.others_cpu:.0%} "
                                        f"and {s.others_cpu:.0%} of the CPUs)")
    if noise is None:
        return SpeedVerdict(None, None, "too short to tell (fewer than two timed windows after warm-up)")
    if noise > NOISE_TOO_LARGE:
        return SpeedVerdict(plus, None, f"too noisy to tell (step times vary ±{noise:.0%})")
    return SpeedVerdict(plus, abs(math.log(speedup)) <= math.log1p(noise), None)


def load_differs(summaries: list[RunSummary]) -> str | None:
    """A warning when the runs ran under different load (see LOAD_GAP), None otherwise."""
    seen = [(s.run_id, s.others_cpu) for s in summaries if s.others_cpu is not None]
    if len(seen) < 2:
        return None
    low, high = min(seen, key=lambda x: x[1]), max(seen, key=lambda x: x[1])
    if high[1] - low[1] <= LOAD_GAP:
        return None
    return (f"warning: the runs ran under different load (other processes used {low[1]:.0%} of the CPUs during "
            f"{low[0]}, {high[1]:.0%} during {high[0]}): their speed-ups measure the machine, not the precision; "
            "rerun them on a quiet machine")
