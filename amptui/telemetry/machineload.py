"""The load a run's timed windows ran under, read at each step record (host counters only: no
device read, a few syscalls): the 1-minute load average and the share of the machine's CPU time
that other processes used in the window. compare and ab read them to tell a speed-up from a busy
machine (core/comparison/comparestep.py)."""

from __future__ import annotations

import os
import time

import psutil


def _busy_seconds(times) -> float:
    """CPU seconds the machine spent on anything but idling, summed over its CPUs."""
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _own_seconds(me: psutil.Process) -> float:
    """This process's CPU seconds, with its children (data-loader workers, torchrun's ranks)."""
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return total


class MachineLoad:
    """One per recorder: `window()` returns (load average, others' CPU share since the last call)."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.cpus = psutil.cpu_count() or 1
        self.last = self._read()

    def _read(self) -> tuple[float, float, float] | None:
        try:
            return _busy_seconds(psutil.cpu_times()), _own_seconds(self.me), time.monotonic()
        except (psutil.Error, OSError):
            return None

    def restart(self) -> None:
        """The next window starts now (what ran before, e.g. another variant's turn, is not counted)."""
        self.last = self._read()

    def window(self) -> tuple[float | None, float | None]:
        """(1-minute load average, share 0..1 of all CPUs' time used by other processes since the last call)."""
        try:
            load = round(os.getloadavg()[0], 2)
        except OSError:
            load = None
        now, before = self._read(), self.last
        self.last = now
        if now is None or before is None or now[2] <= before[2]:
            return load, None
        others = (now[0] - before[0]) - (now[1] - before[1])
        share = others / ((now[2] - before[2]) * self.cpus)
        return load, round(min(1.0, max(0.0, share)), 3)
