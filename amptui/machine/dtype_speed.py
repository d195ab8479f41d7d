"""Which reduced-precision dtypes are slow on this machine's CPU, and why, in words.

A CPU's flags can claim bfloat16 instructions that torch does not use fast (a virtual CPU, a torch
build), so a measured matmul rate (machine/peaks.py's cache, written by `amptui doctor` and by the
first run that needs it) decides where one exists; the flags decide otherwise. Reading the facts
imports no torch (the dashboard asks on every toggle change); measuring does, and only the
launcher does it (`measured=True`), never the dashboard.
"""

from __future__ import annotations

from typing import Mapping

from amptui.core.config.precision import DTYPES, FULL, Dtype, Precision, wide_dtype
from amptui.core.config.resolve import auto_fallback_note, falls_back
from amptui.core.config.values import Config
from amptui.core.fmt import flops_unit, fmt_flops
from amptui.machine import cpu as cpu_features
from amptui.machine import peaks

SLOW_RATIO = 0.9   # the doctor's rule: a dtype measured under 0.9x float32's rate costs time


def cached_cpu_rates() -> dict[str, float]:
    """{dtype: TFLOP/s} measured on this CPU model (any torch version or thread count: the best
    rate seen per dtype), from the peak cache file; {} where nothing was measured. No torch."""
    name = cpu_features.cpu_name()
    best: dict[str, float] = {}
    for key, rate in peaks.read_peak_cache().items():
        label, _, rest = key.partition("|")
        dtype = rest.partition("|")[0]
        if label.rpartition(" (")[0] == name or label == name:
            best[dtype] = max(rate, best.get(dtype, 0.0))
    return best


def measure_cpu_rates(dtypes: tuple[str, ...]) -> dict[str, float]:
    """Measured rates of float32 and `dtypes` on this CPU (torch; each measured once per machine
    and cached by peaks.peak_tflops, about 0.3 s each); {} where torch cannot measure."""
    try:
        return {d: peaks.peak_tflops("cpu", d) for d in (FULL, *dtypes)}
    except Exception:  # noqa: BLE001 - measuring is advice; a failure leaves the flags to decide
        return {}


def slow_reason(dtype: str, rates: Mapping[str, float], flags: set[str]) -> str | None:
    """Why autocast to `dtype` is slow on a CPU with these measured `rates` and /proc/cpuinfo
    `flags`, in a few words ("measured 0.001 TFLOP/s, float32 0.085"); None where it is fast or
    nothing says otherwise. Measurements first: flags can claim what torch does not use."""
    rate, full = rates.get(dtype), rates.get(FULL)
    if rate is not None and full:
        if rate >= SLOW_RATIO * full:
            return None
        unit = flops_unit(rate, full)  # one unit for both: "measured 1 GFLOP/s, float32 85"
        return f"measured {fmt_flops(rate, unit)}, float32 {fmt_flops(full, unit, with_unit=False)}"
    if not flags or "sse2" not in flags:   # unreadable, or not x86: no claim
        return None
    known = DTYPES.get(dtype)
    if known is None or not known.cpu_flags or any(flag in flags for flag in known.cpu_flags):
        return None
    return f"no {known.cpu_isa} instructions"


def slow_dtypes(device_type: str, measured: bool = False, dtypes: tuple[str, ...] | None = None
                ) -> dict[str, str]:
    """{dtype: why} for the reduced dtypes that are slow on `device_type` here. Only a CPU is
    judged (a GPU's auto dtype is its fast one). `measured`: measure what the cache lacks first
    (torch; the launcher only)."""
    if device_type != "cpu":
        return {}
    wanted = tuple(dtypes or DTYPES)
    rates = cached_cpu_rates()
    if measured and any(d not in rates for d in (FULL, *wanted)):
        rates = {**rates, **measure_cpu_rates(wanted)}
    _, flags = cpu_features.read_cpuinfo()
    out = {}
    for dtype in wanted:
        why = slow_reason(dtype, rates, flags)
        if why:
            out[dtype] = why
    return out


def summary_note(cfg: Config, device_type: str) -> tuple[Precision, str | None, str | None]:
    """For the home screen, before anything runs: the precision a launch would pick here, a short
    line (<= 46 columns: the toggles panel at 80 columns) when that precision is a slow one or
    automatic precision fell back to float32, and the full story for its tooltip. No torch, no
    measuring: the cached rates and the flags only."""
    slow = slow_dtypes(device_type)
    fallback = falls_back(cfg, device_type, slow)
    if fallback:
        return (Precision(False, fallback, False), f"auto → fp32: {fallback} is slow on this CPU",
                f"{auto_fallback_note(cfg, device_type, slow)} (here: set dtype to {fallback})")
    precision = Precision.from_config(cfg, device_type)
    why = slow.get(precision.dtype) if precision.autocast else None
    if not why:
        return precision, None, None
    return (precision, f"⚠ {precision.dtype} is slow on this CPU",
            f"{precision.dtype} autocast is slow on this CPU ({why}): expect it slower than float32; "
            "turn autocast off, or see `amptui doctor`")


# --- the notice for a dtype this CPU only emulates ------------------------------------------------

def emulated_notice(dtype: Dtype) -> str:
    return (f"{dtype.name} is emulated on this CPU (no {dtype.cpu_isa} instructions): expect it slower than "
            "float32 (float32 is faster here; `amptui doctor` measures it)")


EMULATED_BF16_NOTICE = emulated_notice(DTYPES[wide_dtype()])


def emulated_dtype_notice(device_type: str, autocast: bool, dtype: str) -> str | None:
    """The warning for an autocast dtype this machine only emulates: a dtype with `cpu_flags` (bfloat16)
    on an x86 CPU that has none of them, where torch converts in software and runs several times
    slower than float32. None where the dtype is native, makes no claim (no `cpu_flags`), or where
    the CPU's flags cannot be read."""
    known = DTYPES.get(dtype)
    if device_type != "cpu" or not autocast or known is None or not known.cpu_flags or not known.cpu_notice:
        return None
    rates = cached_cpu_rates()
    if dtype in rates and FULL in rates:  # a measurement outranks the flags (which may claim too much)
        why = slow_reason(dtype, rates, set())
        return None if why is None else (f"{dtype} is slow on this CPU ({why}): expect it slower than "
                                         "float32 (`amptui doctor` measures it)")
    _, flags = cpu_features.read_cpuinfo()
    if not flags or "sse2" not in flags:  # unreadable, or not x86 (ARM names its bf16 otherwise)
        return None
    return None if any(flag in flags for flag in known.cpu_flags) else emulated_notice(known)
