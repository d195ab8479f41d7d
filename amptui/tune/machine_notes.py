"""What this machine allows a tune search, in words: its name, whether torch.compile and the mode tried
last (PrecisionMode.tune_last) can run,
whether it was too busy for firm CPU timings, and the hardware clause of the precision verdict."""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

from amptui.core.comparison.tf32note import baseline_line
from amptui.core.modes import PrecisionMode
from amptui.machine import hardware
from amptui.machine.busy import busy_load
from amptui.machine.cpu import cpu_name


def tf32_note(tf32: Any) -> list[str]:
    line = baseline_line("(the reference)", tf32)
    return [line[0].upper() + line[1:] + "."] if line else []


def device_name(device_type: str) -> str:
    if device_type == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return cpu_name()


def compiler_missing(device_type: str) -> str:
    """torch.compile's default backend (inductor) needs a C++ compiler on the CPU, Triton on CUDA."""
    if device_type == "cuda":
        return "" if importlib.util.find_spec("triton") else "torch.compile on CUDA needs Triton (not installed)"
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++", "cc")):
        return "torch.compile on the CPU needs a C++ compiler (none on PATH)"
    return ""


def missing_reason(mode: PrecisionMode) -> str:
    """Why `mode` cannot be tried here ("" when it can): what it needs that is not installed."""
    return mode.missing() or ""


def emulated_reason(mode: PrecisionMode, device_type: str) -> str:
    """Why a trial of `mode` is judged on accuracy only here ("" where the hardware runs its GEMMs:
    a CUDA GPU of its `gemm_capability`, or a mode that needs none)."""
    need = mode.gemm_capability
    if need is None:
        return ""
    if device_type != "cuda":
        return f"emulated on this CPU (no {mode.name} GEMM): judged on accuracy only, its speed says nothing"
    import torch

    cc = torch.cuda.get_device_capability()
    if cc < need:
        return (f"emulated on this GPU (compute capability {cc[0]}.{cc[1]}; {mode.name} GEMMs need "
                f"{need[0]}.{need[1]}+): judged on accuracy only, its speed says nothing")
    return ""


def busy_note(device_type: str) -> list[str]:
    """Other work on the machine's CPUs makes CPU timings vary from trial to trial: say so."""
    busy = busy_load() if device_type == "cpu" else None
    if busy is None:
        return []
    load, cores = busy
    return [f"This machine was busy (load average {load:.0f} on {cores} cores): CPU timings vary from trial to "
            "trial; tune again when it is quiet for a firmer answer."]


def hardware_note(device_type: str) -> str:
    """One clause on the hardware behind the precision verdict."""
    if device_type == "cuda":
        gpu = (hardware.describe().get("gpus") or [{}])[0]
        capability = f" (compute capability {gpu['compute_capability']})" if gpu.get("compute_capability") else ""
        return (f"{gpu.get('name') or 'this GPU'}{capability} runs "
                "bfloat16 and float16 on tensor cores") if gpu.get("tensor_cores") else ""
    cpu = hardware.describe()["cpu"]
    have = [f for f in hardware.BF16_CPU_FLAGS if (cpu.get("flags") or {}).get(f)]
    if have:
        return f"this CPU has native bfloat16 instructions ({', '.join(have)})"
    return "this CPU has no bfloat16 instructions, so bfloat16 is emulated and autocast costs time"
