"""CPU runs keep freed memory for reuse instead of faulting in fresh pages every step.

Counted in page faults (the kernel's per-process minor-fault counter), not seconds: the count is
repeatable where timings on a shared machine are not. Each fresh 64 MiB block costs ~16,000
faults; a block the heap kept costs none (once the heap has grown to fit the loop).
"""

from __future__ import annotations

import os

from amptui.trainer import host_memory


def test_allocator_settings_of_your_own_are_left_alone(monkeypatch):
    # (each call returns before touching this process's allocator)
    for name in [k for k in os.environ if k.startswith("MALLOC_")] + ["LD_PRELOAD"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert host_memory.keep_freed_memory() == \
        "host memory: left to your allocator settings (MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES)"
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.delenv("GLIBC_TUNABLES")
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    assert host_memory.keep_freed_memory() == "host memory: left to your allocator settings (LD_PRELOAD)"
