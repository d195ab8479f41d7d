"""`log.tensorboard = true`: the step and epoch records mirrored as TensorBoard scalars, for people
used to reading AMP runs there. Written by rank 0 next to the event stream."""

from __future__ import annotations

from pathlib import Path

from ..telemetry.sinks import Sink


class TensorBoardScalars(Sink):
    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def step(self, record: dict) -> None:
        step = record["step"]
        for key in ("loss", "lr", "scale", "skipped_total", "samples_per_s", "step_time_ms", "grad_norm", "tflops"):
            if record.get(key) is not None:
                self.writer.add_scalar(f"train/{key}", record[key], step)
        for key, value in (record.get("mem") or {}).items():
            if value is not None:
                self.writer.add_scalar(f"memory/{key}_mib", value / 2**20, step)

    def epoch(self, record: dict, step: int) -> None:
        for key in ("train_loss", "val_loss", "val_acc", "epoch_time_s"):
            if record.get(key) is not None:
                self.writer.add_scalar(f"epoch/{key}", record[key], step)

    def close(self) -> None:
        self.writer.close()
