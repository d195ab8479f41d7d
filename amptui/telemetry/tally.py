"""What the Recorder tallies besides the window: the stream's counters (the trainer's checkpointed
progress extends them), where an epoch's time went, and where a window's trouble was (the step
of a non-finite loss; the replays' first non-finite findings merged into the range samples)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from amptui.core.stream.records import Numerics


@dataclass
class Counters:
    """What the stream has counted so far; the trainer's checkpointed progress extends it."""

    step: int = 0             # optimizer steps done
    epoch: int = 0            # current epoch, 0-based
    skipped_total: int = 0
    epoch_loss_sum: float = 0.0
    epoch_batches: int = 0


@dataclass
class EpochTimes:
    """Where an epoch's wall time went: training steps, evaluation, checkpoints."""

    epoch_time_s: float = 0.0
    eval_time_s: float = 0.0
    checkpoint_time_s: float = 0.0


def with_replays(samples: list[Numerics], traced: dict[int, Numerics]) -> list[Numerics]:
    """The window's range samples with the replays' findings (a replay names the step's first
    non-finite module over what the sample saw: it also measured the value), by step."""
    by_step = {r.step: r for r in samples}
    for step, found in sorted(traced.items()):
        if step in by_step:
            by_step[step].first_nonfinite, by_step[step].traced = found.first_nonfinite, True
        else:
            samples.append(found)
    return sorted(samples, key=lambda r: r.step)


def first_bad_step(window: Any, first: int) -> int | None:
    """The first step of the window whose own loss was not finite, when its losses were kept apart
    (`step_losses`: window step index -> that step's loss; steps without a loss are absent)."""
    return next((first + i for i, v in sorted(window.step_losses.items()) if not math.isfinite(v)), None)


def nonfinite_at(window: Any, first: int) -> str | None:
    """Where a window's non-finite loss came from: "at step N" when its steps' losses were kept
    apart (the first non-finite one), else the window's span; None when the loss is finite."""
    if window.loss is not None and math.isfinite(window.loss):
        return None
    bad = first_bad_step(window, first)
    if bad is not None:
        return f"at step {bad}"
    last = first + window.steps - 1
    return f"at step {last}" if window.steps == 1 else f"in steps {first}-{last}"


def loss_source(window: Any, first: int, firsts: dict[int, dict]) -> dict | None:
    """The first non-finite module behind a window's non-finite loss (`firsts`: step -> what the
    window's range samples and replays found): the one found on the step whose loss went
    non-finite, else the window's earliest; None when the loss is finite or nothing was found."""
    if window.loss is None or math.isfinite(window.loss) or not firsts:
        return None
    bad = first_bad_step(window, first)
    return firsts[bad] if bad is not None and bad in firsts else firsts[min(firsts)]
