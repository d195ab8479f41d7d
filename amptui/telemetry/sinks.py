"""Where step and epoch records go: one `Sink` interface, as torchtitan's metric loggers have.

The Recorder hands each record (a `core.records` dataclass) to every sink in its `sinks` list, in
order: the run's event stream first (`EventStream`), then any mirror of it (the trainer's
TensorBoard scalars). A new destination is one class with these three methods, appended to
`Recorder.sinks`.
"""

from __future__ import annotations

from typing import Protocol

from amptui.core.events import EventWriter
from amptui.core.records import Epoch, Step


class Sink(Protocol):
    def step(self, record: Step) -> None:
        """A step record (one per `log.every` window)."""

    def epoch(self, record: Epoch, step: int) -> None:
        """An epoch record, and the optimizer step the epoch ended at."""

    def close(self) -> None:
        """The run has ended: flush and let go of files."""


class EventStream:
    """The run's event stream (events.jsonl): step and epoch records appended as lines."""

    def __init__(self, writer: EventWriter):
        self.writer = writer

    def step(self, record: Step) -> None:
        self.writer.write(record)

    def epoch(self, record: Epoch, step: int) -> None:
        self.writer.write(record)

    def close(self) -> None:
        self.writer.close()
