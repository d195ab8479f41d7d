"""The step and epoch records' fields, named once for every writer (trainer, Monitor).

A new step-record field is one line here plus where its value is measured (the meter or the
recorder); readers that fold the stream name the fields they show."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class StepRecord:
    step: int
    epoch: int
    loss: float | None
    lr: float | None
    scale: float | None             # None without a GradScaler
    skipped: int                    # optimizer steps skipped in the window
    skipped_total: int
    samples_per_s: float | None
    step_time_ms: float             # training steps only: no evaluation, checkpoint or record writing
    data_wait_ms: float | None      # per step, host time blocked fetching batches; None when not measured
    mem: dict[str, int]
    grad_norm: float | None = None  # optional: written only when known
    tflops: float | None = None

    OPTIONAL = ("grad_norm", "tflops")

    def fields(self) -> dict[str, Any]:
        out = asdict(self)
        for key in self.OPTIONAL:
            if out[key] is None:
                del out[key]
        return out


STEP_FIELDS = tuple(f.name for f in fields(StepRecord))
REQUIRED_STEP_FIELDS = tuple(name for name in STEP_FIELDS if name not in StepRecord.OPTIONAL)


@dataclass
class EpochTimes:
    """Where an epoch's wall time went: training steps, evaluation, checkpoints."""

    epoch_time_s: float = 0.0
    eval_time_s: float = 0.0
    checkpoint_time_s: float = 0.0
