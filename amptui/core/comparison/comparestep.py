"""Runs set side by side at one step (core/comparison/compare.py's table): the last step every run reached,
each run's loss there (read again from its events where it went further), whether it stopped
early, and the noise on a speed-up from the runs' step-time spread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.core import figures
from amptui.core.stream.events import EventReader, primary_events_file
from amptui.core.stream.records import Step

if TYPE_CHECKING:
    from amptui.core.comparison.runsummary import RunSummary

_CHUNK = 8 * 1024 * 1024
# The speed verdict itself (noise, "same speed", "too noisy to tell", a control) is core/figures.py's.
# Runs whose windows saw other processes take shares of the CPUs this far apart ran under different
# load: their speed-up measures the machine, not the precision.
LOAD_GAP = 0.2
# A control differs in these alone: how it was named or seeded, and the three precision keys whose
# effect its precision words say ("auto" and its resolved value are one setup)
_NOT_SETUP = ("run.seed", "run.name", "run.description", "amp.autocast", "amp.dtype", "amp.grad_scaler")


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
    """The relative noise of a speed-up of `s` against `base` (figures.ratio_noise); None when
    either run has fewer than two timed windows after warm-up."""
    return figures.ratio_noise(s.step_ms_spread, base.step_ms_spread)


def speedup_of(s: RunSummary, base: RunSummary) -> float | None:
    """`s`'s steady samples/s against `base`'s (ms/step where no throughput was recorded, e.g. a
    Monitor without batch sizes)."""
    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b <= 0 else a / b

    found = ratio(s.steady_samples_per_s, base.steady_samples_per_s)
    return found if found is not None else ratio(base.steady_step_ms, s.steady_step_ms)


def control_of(summaries: list[RunSummary]) -> RunSummary | None:
    """A control among the runs: a later run of the baseline's own setup (same preset or script,
    same precision, same variant), whose speed-up and memory saving against the baseline are the
    machine's run-to-run noise, measured."""
    if len(summaries) < 2:
        return None
    base = summaries[0]

    def setup(s: RunSummary) -> tuple[object, ...]:  # what it trained, not how it was named or seeded
        kept = sorted((k, repr(v)) for k, v in s.flat_config.items() if k not in _NOT_SETUP
                      and not k.startswith(("numerics.", "log.")))
        return (s.preset, s.precision_words, tuple(kept))

    return next((s for s in summaries[1:] if s.ended and not never_stepped(s) and setup(s) == setup(base)), None)


def stopped_early(s: RunSummary) -> bool:
    """Ended (stopped, killed, failed) before the steps it was set to run."""
    return s.ended and s.status != "completed" and bool(s.total_steps) and s.step < (s.total_steps or 0)


@dataclass(frozen=True)
class SpeedVerdict:
    """What a speed-up of `s` against `base` may be said as: plus (the +- shown), same (inside the
    narrow "same speed" band; figures.speed_call) and why it cannot be told at all (None when it can)."""

    plus: float | None = None
    same: bool | None = None
    unresolved: str | None = None


def speed_verdict(s: RunSummary, base: RunSummary, speedup: float | None,
                  control: RunSummary | None = None) -> SpeedVerdict:
    """figures.speed_call on two runs: their windows' spread, a `control` run of the baseline's setup
    where one ran (control_of), and first of all the load they ran under."""
    if s is base or speedup is None or speedup <= 0:
        return SpeedVerdict()
    noise = speed_noise(s, base)
    if s.others_cpu is not None and base.others_cpu is not None and abs(s.others_cpu - base.others_cpu) > LOAD_GAP:
        return SpeedVerdict(None if noise is None else speedup * noise, None,
                            f"ran under different load (other processes used {base.others_cpu:.0%} "
                            f"and {s.others_cpu:.0%} of the CPUs)")
    against = speedup_of(control, base) if control is not None and control is not s else None
    call = figures.speed_call(speedup, noise, against)
    plus = speedup * call.noise if call.noise is not None else None
    return SpeedVerdict(plus, call.same, call.unresolved)


def noisy_note(summaries: list[RunSummary]) -> str | None:
    """The runs whose speed-up was too noisy to tell, what made it so and what to do (under the table,
    whose cell says only "too noisy to tell")."""
    if len(summaries) < 2:
        return None
    base, control = summaries[0], control_of(summaries)
    said = []
    for s in summaries[1:]:
        why = speed_verdict(s, base, speedup_of(s, base), control).unresolved or ""
        if why.startswith("too noisy"):
            said.append(f"{s.run_id}: {why.removeprefix('too noisy to tell (').rpartition('): ')[0]}")
    if not said:
        return None
    return (f"speed-up too noisy to tell ({'; '.join(said)}): \"same speed\" needs a band within "
            f"±{figures.SAME_SPEED_BAND:.0%}; {figures.NOISY_ADVICE}" + ("" if any(
                (s.start or {}).get("interleaved") for s in summaries) else
                " (`amptui ab --interleave` lets the variants take turns, so a drift falls on all alike)"))


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
