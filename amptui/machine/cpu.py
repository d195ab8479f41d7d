"""The CPU's model and instruction-set flags (from /proc/cpuinfo). No torch at import time.
(Which autocast dtypes this CPU only emulates: machine/dtype_speed.py.)"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from amptui.core.config.precision import DTYPES

# /proc/cpuinfo flags that matter for mixed precision on a CPU.
CPU_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16", "amx_fp16", "avx512f", "avx2", "f16c")
BF16_CPU_FLAGS = DTYPES["bfloat16"].cpu_flags   # ("amx_bf16", "avx512_bf16")


def cpu_name() -> str:
    """The CPU's model name, as the `start` record and the doctor report it."""
    return read_cpuinfo()[0] or platform.processor() or platform.machine()


def cpu_info(torch) -> dict[str, Any]:
    """The doctor's `cpu` section: model, cores, the flags of CPU_FLAGS, torch's kernel ISA."""
    model, flags = read_cpuinfo()
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - older torch
        capability = None
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {
        "model": model or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "flags": {flag: flag in flags for flag in CPU_FLAGS},
        "capability": capability,   # the vector ISA torch's CPU kernels dispatch to (e.g. AVX512)
        "bf16_native": any(flag in flags for flag in BF16_CPU_FLAGS),
    }


def read_cpuinfo(path: str = "/proc/cpuinfo") -> tuple[str | None, set[str]]:
    """The CPU's model name and flags from /proc/cpuinfo ((None, empty) where it cannot be read).
    Everything here asks through this one function, so a test can stand in another CPU."""
    model: str | None = None
    flags: set[str] = set()
    try:
        text = Path(path).read_text()
    except OSError:
        return None, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:   # x86 / ARM
            flags = set(value.split())
    return model, flags
