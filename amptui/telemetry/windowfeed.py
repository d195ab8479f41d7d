"""The step window's input side, beside its meter (meter.py): how many samples it trained on (the
step record's samples_per_s) and how long the loop waited for its batches (data_wait_ms). Host
counts only: nothing here reads the device."""

from __future__ import annotations

from typing import Iterable

from amptui.telemetry.meter import TimedBatches


class WindowFeed:
    def __init__(self) -> None:
        self._samples = 0
        self._have_samples = False
        self._batches: TimedBatches | None = None
        self._waited_seen = 0.0        # of the current batches' waited_s, already reported
        self._waited_window = 0.0      # from earlier batches iterators, not yet reported
        self._measures_wait = False

    def timed(self, batches: Iterable) -> TimedBatches:
        """Wrap the loop's batch iterator: the time blocked in next() becomes data_wait_ms."""
        if self._batches is not None:
            self._waited_window += self._batches.waited_s - self._waited_seen
        self._batches = TimedBatches(batches)
        self._waited_seen = 0.0
        self._measures_wait = True
        return self._batches

    def add_wait(self, seconds: float) -> None:
        """Host seconds the loop waited for a batch, measured by the caller (the script hooks)."""
        self._waited_window += seconds
        self._measures_wait = True

    def add_samples(self, samples: int) -> None:
        self._samples += int(samples)
        self._have_samples = True

    def samples_per_s(self, seconds: float, world_size: int) -> float | None:
        """The window's samples (every rank's) per second; None when no step said its samples."""
        samples = self._samples * world_size if self._have_samples else None
        self._samples = 0
        return samples / seconds if samples is not None and seconds > 0 else None

    def data_wait_ms(self, steps: int) -> float | None:
        """The window's mean wait per step; None when nothing measures it (a loop amptui does not see)."""
        if not self._measures_wait:
            return None
        waited = self._waited_window
        if self._batches is not None:
            now = self._batches.waited_s
            waited += now - self._waited_seen
            self._waited_seen = now
        self._waited_window = 0.0
        return 1000 * waited / steps
