"""Keep freed host memory in the trainer process for reuse (CPU runs on glibc).

glibc's malloc gives big blocks back to the kernel when they are freed (munmap above a threshold
that moves with the sizes the process has freed so far; trimming the heap's top), so a CPU
training step, which frees and re-allocates its activations and gradients, faults in fresh zeroed
pages every step. On the machine amptui was written on that was up to 40% of a bfloat16 step, and
how much of it a process paid depended on its allocation history: two processes running the same
loop differed by several percent (benchmarks/README.md). Two mallopt settings make the heap keep
and reuse that memory, the way PyTorch's CUDA caching allocator does on a GPU: big blocks come
from the main heap instead of their own mappings, and the heap is never trimmed. (Blocks over
64 MiB allocated by other threads still get mappings of their own; the training loop allocates in
the main thread.)

The cost is resident memory: freed blocks stay mapped, so peak RSS reads higher (~10% for the
bare recipe in benchmarks/README.md). `run.reuse_host_memory = false` leaves the system
allocator's defaults, as a plain script has.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1   # <malloc.h>: free heap top kept before trimming; -1 (SIZE_MAX) = never trim
M_MMAP_MAX = -4         # <malloc.h>: how many blocks may be served by mmap at once; 0 = none
NEVER = -1

# Someone who tuned the allocator themselves (or replaced it) keeps their choice.
_USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> str:
    """Apply the settings to this process; returns one line for the run's log saying what was done."""
    user = [name for name in _USER_SETTINGS if os.environ.get(name)]
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        user.append("GLIBC_TUNABLES")
    if any(lib in os.environ.get("LD_PRELOAD", "") for lib in ("jemalloc", "tcmalloc", "mimalloc")):
        user.append("LD_PRELOAD")
    if user:
        return f"host memory: left to your allocator settings ({', '.join(user)})"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "host memory: system allocator defaults (the reuse settings are for glibc)"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "host memory: system allocator defaults (no mallopt in this libc)"
    no_mmap = mallopt(M_MMAP_MAX, 0) == 1
    no_trim = mallopt(M_TRIM_THRESHOLD, NEVER) == 1
    if no_mmap and no_trim:
        return "host memory: freed blocks kept for reuse (glibc mallopt: no mmap, no trim)"
    applied = [name for name, ok in (("no mmap", no_mmap), ("no trim", no_trim)) if ok]
    return f"host memory: mallopt took only {', '.join(applied) or 'none'} of the reuse settings"
