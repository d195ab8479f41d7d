"""Where step and epoch records go: one `Sink` interface, as torchtitan's metric loggers have.

The Recorder hands each record (a `core.stream.records` dataclass) to every sink in its `sinks` list, in
order: the run's event stream first (`EventStream`), then any mirror of it (the trainer's
TensorBoard scalars, MLflow, a Kubeflow TrainJob's status). A new destination is one class with
these methods, appended to `Recorder.sinks` (mirrors.py says which a run gets).
"""

from __future__ import annotations

from typing import Protocol

from amptui.core.modes import probes
from amptui.core.stream.events import EventWriter
from amptui.core.stream.records import Epoch, Numerics, Record, Step
from amptui.telemetry.outbound import CLOSE_S, Outbox


class Sink(Protocol):
    def step(self, record: Step) -> None:
        """A step record (one per `log.every` window)."""

    def epoch(self, record: Epoch, step: int) -> None:
        """An epoch record, and the optimizer step the epoch ended at."""

    def close(self) -> None:
        """The run has ended: flush and let go of files."""

    def note(self, record: Record) -> None:
        """Every other record the run writes (start, numerics, scaler, warning, end), in order;
        most sinks need none of them."""
        return None


class EventStream(Sink):
    """The run's event stream (events.jsonl): step and epoch records appended as lines (the
    Recorder writes the other records to it itself)."""

    def __init__(self, writer: EventWriter):
        self.writer = writer

    def step(self, record: Step) -> None:
        self.writer.write(record)

    def epoch(self, record: Epoch, step: int) -> None:
        self.writer.write(record)

    def close(self) -> None:
        self.writer.close()


class Mirror(Sink):
    """A sink that sends through its own queue and thread (outbound.Outbox): MLflow, TensorBoard,
    the TrainJob status, notifications. The Recorder closes all of a run's mirrors at once under one
    deadline (outbound.close_together); `close` alone waits for this one, at most `close_wait_s`."""

    outbox: Outbox
    close_wait_s: float = CLOSE_S

    def last_jobs(self) -> None:
        """The jobs for the end (end the MLflow run, close the TensorBoard file), queued."""
        return None

    def close(self) -> None:
        self.last_jobs()
        self.outbox.close(self.close_wait_s)


def numerics_summary(record: Numerics) -> dict[str, float]:
    """A sampled step's per-layer numerics in three figures: the narrowest range headroom (log2 bits
    to the dtype's largest finite value, forward or gradient), the largest gradient underflow share
    and, per mode's probe in the record, its lowest figure (`min_<key>_<figure>`)."""
    fields = record.fields()
    headroom = [v for layer in fields.get("layers") or [] for v in (layer.get("forward"), layer.get("grad"))
                if isinstance(v, (int, float))]
    underflow = [layer["underflow"] for layer in fields.get("layers") or []
                 if isinstance(layer.get("underflow"), (int, float))]
    out = {}
    if headroom:
        out["min_headroom_log2"] = float(min(headroom))
    if underflow:
        out["max_grad_underflow"] = float(max(underflow))
    for probe in probes():
        figures = [v for entry in fields.get(probe.key) or [] if isinstance(v := entry.get(probe.figure), (int, float))]
        if figures:
            out[f"min_{probe.key}_{probe.figure}"] = float(min(figures))
    return out
