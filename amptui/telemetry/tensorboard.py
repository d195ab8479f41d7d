"""`log.tensorboard = true`: the step and epoch records mirrored as TensorBoard scalars, for people
used to reading AMP runs there. Written by rank 0 into RUN_DIR/tensorboard, as one more Recorder
sink (sinks.py), by every writer of the event stream: amptui's trainer, a script under the hooks
(`amptui run --script`) and an `amptui.Monitor`."""

from __future__ import annotations

import math
from pathlib import Path

from amptui.core.records import EPOCH, STEP, Epoch, Step
from amptui.telemetry.sinks import Sink

STEP_SCALARS = (STEP.loss, STEP.lr, STEP.scale, STEP.skipped_total, STEP.samples_per_s, STEP.step_time_ms,
                STEP.grad_norm, STEP.tflops)
EPOCH_SCALARS = (EPOCH.train_loss, EPOCH.val_loss, EPOCH.val_acc, EPOCH.epoch_time_s)


class TensorBoardScalars(Sink):
    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def step(self, step_record: Step) -> None:
        record = step_record.fields()
        step = record[STEP.step]
        for key in STEP_SCALARS:
            if record.get(key) is not None:
                self.writer.add_scalar(f"train/{key}", record[key], step)
        for key, value in (record.get(STEP.mem) or {}).items():
            if value is not None:
                self.writer.add_scalar(f"memory/{key}_mib", value / 2**20, step)

    def epoch(self, epoch_record: Epoch, step: int) -> None:
        record = epoch_record.fields()
        for key in EPOCH_SCALARS:
            if record.get(key) is not None and math.isfinite(record[key]):  # as the event stream: NaN is no value
                self.writer.add_scalar(f"epoch/{key}", record[key], step)

    def close(self) -> None:
        self.writer.close()

