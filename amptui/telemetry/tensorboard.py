"""`log.tensorboard = true`: the step and epoch records mirrored as TensorBoard scalars, for people
used to reading AMP runs there. Written by rank 0 into RUN_DIR/tensorboard, as one more Recorder
sink (sinks.py), by every writer of the event stream: amptui's trainer, a script under the hooks
(`amptui run --script`) and an `amptui.Monitor`."""

from __future__ import annotations

import math
from pathlib import Path

from amptui.core.stream.records import EPOCH, STEP, Epoch, Step
from amptui.telemetry.outbound import Outbox
from amptui.telemetry.sinks import Mirror

STEP_SCALARS = (STEP.loss, STEP.lr, STEP.scale, STEP.skipped_total, STEP.samples_per_s, STEP.step_time_ms,
                STEP.grad_norm, STEP.tflops)
EPOCH_SCALARS = (EPOCH.train_loss, EPOCH.val_loss, EPOCH.val_acc, EPOCH.epoch_time_s)


class TensorBoardScalars(Mirror):
    """Scalars written on the mirror's own thread (outbound.Outbox), as every mirror: a folder that
    cannot be written (full, read-only) is one line and the run goes on without it."""

    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer: SummaryWriter | None = None
        self.outbox = Outbox("tensorboard", "log.tensorboard")
        self.outbox.put(lambda: self._open(SummaryWriter, run_dir / "tensorboard"))

    def _open(self, writer_class, folder: Path) -> None:
        self.writer = writer_class(log_dir=str(folder))

    def _add(self, scalars: list[tuple[str, float, int]]) -> None:
        if scalars:
            self.outbox.put(lambda: self._write(scalars))

    def _write(self, scalars: list[tuple[str, float, int]]) -> None:
        if self.writer is not None:
            for tag, value, step in scalars:
                self.writer.add_scalar(tag, value, step)

    def step(self, step_record: Step) -> None:
        record = step_record.fields()
        step = record[STEP.step]
        scalars = [(f"train/{key}", record[key], step) for key in STEP_SCALARS if record.get(key) is not None]
        scalars += [(f"memory/{key}_mib", value / 2**20, step) for key, value in (record.get(STEP.mem) or {}).items()
                    if value is not None]
        self._add(scalars)

    def epoch(self, epoch_record: Epoch, step: int) -> None:
        record = epoch_record.fields()
        self._add([(f"epoch/{key}", record[key], step) for key in EPOCH_SCALARS  # as the event stream: NaN is no value
                   if record.get(key) is not None and math.isfinite(record[key])])

    def last_jobs(self) -> None:
        def shut() -> None:
            if self.writer is not None:
                self.writer.close()

        self.outbox.put(shut)
