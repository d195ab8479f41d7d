"""Keep freed host memory in the trainer process for reuse (CPU runs on glibc).

glibc's malloc gives big blocks back to the kernel when they are freed (munmap above a
threshold that moves with what the process allocated before; trimming the heap's top), so a
CPU training step, which frees and re-allocates its activations and gradients, faults in fresh
zeroed pages every step. On the machine amptui was written on that was up to 40% of a bfloat16
step, and how much of it a process paid depended on its allocation history: two processes
running the same loop differed by several percent (benchmarks/README.md). Two mallopt settings
make the heap keep and reuse that memory, the way PyTorch's CUDA caching allocator does on a GPU.

The cost is resident memory: freed blocks stay mapped, so peak RSS can read ~10% higher.
`run.reuse_host_memory = false` leaves the system allocator's defaults, as a plain script has.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1   # <malloc.h>: free heap top kept before trimming it (bytes)
M_MMAP_MAX = -4         # <malloc.h>: how many blocks may be served by mmap at once

# Someone who tuned the allocator themselves (or replaced it) keeps their choice.
_USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "GLIBC_TUNABLES")


def keep_freed_memory() -> str:
    """Apply the settings to this process; returns one line for the run's log saying what was done."""
    user = [name for name in _USER_SETTINGS if os.environ.get(name)]
    preload = os.environ.get("LD_PRELOAD", "")
    if user or any(lib in preload for lib in ("jemalloc", "tcmalloc", "mimalloc")):
        return f"host memory: left to your allocator settings ({', '.join(user) or 'LD_PRELOAD'})"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "host memory: system allocator defaults (the reuse settings are for glibc)"
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1
    except (OSError, AttributeError):
        ok = False
    if not ok:
        return "host memory: system allocator defaults (mallopt refused the reuse settings)"
    return "host memory: freed blocks kept for reuse (glibc mallopt: no mmap, no trim)"
