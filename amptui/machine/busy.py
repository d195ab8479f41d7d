"""Whether other work on this machine's CPUs makes timings taken now unreliable: the 1-minute load
average against the cores this process may use. The one check behind `amptui tune`'s "this machine
was busy" note and `amptui doctor`'s caveat on its measured rates."""

from __future__ import annotations

import os

BUSY_PER_CORE = 1.5  # runnable tasks per usable core beyond which CPU timings vary run to run


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def busy_load() -> tuple[float, int] | None:
    """(load average, usable cores) when the machine is busy now; None when it is not, or cannot say."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average here (Windows)
        return None
    cores = usable_cores()
    return (load, cores) if load > BUSY_PER_CORE * cores else None
