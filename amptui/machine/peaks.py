"""The matmul rates behind "fraction of peak": measured per device and dtype, and kept in a cache
file so a run does not measure at every start (`amptui doctor` measures afresh).

Torch is imported inside the functions, so importing this module stays cheap (`amptui --help`)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from amptui.core import figures, safefile
from amptui.core.config.precision import DTYPES, FULL
from amptui.machine.cpu import cpu_name

# What the doctor measures: float32 and every autocast dtype (by name).
MEASURED_DTYPES = (FULL, *sorted(DTYPES))
# Measured only when asked (the autopilot's promote_for = "here" roofline): a tensorwise-scaled float8 GEMM
# (torch._scaled_mm, bfloat16 out), as amp.float8's linears compute.
FLOAT8 = "float8_e4m3fn"

_ALIASES = {"fp32": FULL, "float": FULL, FULL: FULL, "half": "float16", FLOAT8: FLOAT8, "fp8": FLOAT8,
            **{alias: d.name for d in DTYPES.values() for alias in (d.name, d.short)}}

_PEAK_CACHE: dict[tuple[str, str], float] = {}


def dtype_name(dtype: Any) -> str:
    """'float16' for torch.float16, 'fp16', 'half', 'float16', ..."""
    text = str(dtype).removeprefix("torch.")
    try:
        return _ALIASES[text]
    except KeyError:
        known = f"{', '.join(MEASURED_DTYPES[:-1])} or {MEASURED_DTYPES[-1]}"
        raise ValueError(f"unsupported dtype {dtype!r} (use {known})") from None


# --- measurement ---------------------------------------------------------------------------------

# Grow by work, not by one timing: a product smaller than this measures call overhead and, on a busy
# machine, the stall of a thread wake-up rather than the dtype's math (issue 51: float32 "stalled" at a
# small size read 119x slower than bfloat16). Below it the size is never judged by a timing.
MIN_SIZE = {"cpu": 256, "cuda": 1024}
# A control: float32 measured again after the other dtypes; where its gap leaves a dtype's ratio too
# noisy to tell (core/figures.py speed_call, the one speed verdict), no ratio is stood behind.
REPEATS = 5  # timed batches at the final size, at least (more while the budget lasts): the best counts


def measure_matmul_tflops(device: Any = "cpu", dtype: Any = "float32", budget_s: float = 0.3) -> float:
    """Achieved TFLOP/s of square matmuls of `dtype` on `device`, in about `budget_s` seconds.

    The size starts at MIN_SIZE (enough work per product that overhead and a stall do not dominate)
    and grows while the best of several products stays cheap (so a dtype that is slow on this device,
    like float16 on most CPUs, stays at the smallest size), capped at 1024 on a CPU (cache-friendly)
    and 8192 on a GPU; then batches of products are timed, repeated, and the best batch counts, so a
    stray stall of the OS scheduler does not pull the number down. CUDA is synchronised around every
    timing."""
    import torch

    dev = torch.device(device)
    tdtype = getattr(torch, dtype_name(dtype))
    float8 = tdtype is torch.float8_e4m3fn
    cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    cap = 8192 if cuda else 1024
    probe_target = budget_s / 16
    # Our own generator: measuring inside a training process must not move the global RNG.
    gen = torch.Generator(device=dev).manual_seed(0)

    def operands(n: int):
        made = torch.bfloat16 if float8 else tdtype  # float8 has no uniform_: drawn in bfloat16, then cast
        a = torch.empty(n, n, device=dev, dtype=made).uniform_(-1, 1, generator=gen)
        b = torch.empty(n, n, device=dev, dtype=made).uniform_(-1, 1, generator=gen)
        return (a.to(tdtype), b.to(tdtype).t()) if float8 else (a, b)  # _scaled_mm: its second operand column-major

    one = torch.ones((), device=dev)
    product = (lambda a, b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)) if float8 \
        else torch.mm

    def timed(a, b, k: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(k):
            product(a, b)
        sync()
        return time.perf_counter() - t0

    with torch.no_grad():
        n = min(cap, MIN_SIZE["cuda" if cuda else "cpu"])
        a, b = operands(n)
        timed(a, b, 1)                  # lazy init (CUDA context, cuBLAS, thread pool) is not timed
        deadline = time.perf_counter() + budget_s
        # Grow while a product, the best of up to five, takes under the probe target: a stall must
        # hit every one of them to stop the growth. One product far over the target is a slow dtype
        # (a stall only adds time), and repeating it would only cost time.
        while True:
            timed(a, b, 1)              # warm-up at this size
            per_call = timed(a, b, 1)
            for _ in range(4):
                if per_call > 4 * probe_target:
                    break
                per_call = min(per_call, timed(a, b, 1))
            if n >= cap or per_call > probe_target or time.perf_counter() >= deadline:
                break
            n *= 2
            a, b = operands(n)
        flops = 2.0 * n ** 3
        # Many short batches (about budget/30 each); the best one is the rate without stalls.
        k = max(1, int(budget_s / 30 / max(per_call, 1e-7)))
        best = timed(a, b, k) / k
        for _ in range(REPEATS - 1):  # however short the budget: a stall rarely outlasts five batches
            best = min(best, timed(a, b, k) / k)
        while time.perf_counter() < deadline:
            best = min(best, timed(a, b, k) / k)
    del a, b
    return flops / best / 1e12


def unreliable(first: float | None, again: float | None, others: dict[str, float | None] | None = None) -> str | None:
    """Why a device's rates cannot be stood behind, or None: its float32 `first` and its control
    `again` (float32 measured after the other dtypes) judged as every speed verdict is
    (figures.speed_call): a dtype's ratio to float32 that the control's gap leaves too noisy to
    tell, or (no other dtype) a gap past NOISE_TOO_LARGE."""
    if not first or not again:
        return None
    control = again / first
    calls = {d: figures.speed_call(rate / first, None, control) for d, rate in (others or {}).items() if rate}
    untold = [d for d, call in calls.items() if call.unresolved]
    if not untold and (calls or figures.control_gap(control) <= figures.NOISE_TOO_LARGE):
        return None
    unit = 1e3 if max(first, again) < 1 else 1.0
    name = "GFLOP/s" if unit == 1e3 else "TFLOP/s"
    return (f"float32 measured {first * unit:.3g} {name}, then {again * unit:.3g} after the other dtypes: the "
            "machine's speed changed as it measured" + (f", more than {', '.join(untold)} differs from float32"
                                                         if untold else ""))


def measure_checked(devices: list[str] | None = None, budget_s: float = 0.3
                    ) -> tuple[dict[str, dict[str, float | None]], dict[str, str]]:
    """`amptui doctor`'s measurement: measure_all, then float32 again on each device as a control;
    (rates, {device: why its ratios are not measured reliably})."""
    rates = measure_all(devices, budget_s=budget_s)
    unsure = {}
    for device, found in rates.items():
        try:
            again: float | None = measure_matmul_tflops(device, FULL, budget_s)
        except Exception:  # noqa: BLE001 - no control: the rates stand as measured
            again = None
        why = unreliable(found.get(FULL), again, {d: r for d, r in found.items() if d != FULL})
        if why:
            unsure[device] = why
    return rates, unsure


def measure_all(devices: list[str] | None = None, dtypes: tuple[str, ...] = MEASURED_DTYPES,
                budget_s: float = 0.3) -> dict[str, dict[str, float | None]]:
    """{device: {dtype: TFLOP/s}} for the CPU and every visible GPU (None where it failed)."""
    import torch

    if devices is None:
        devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())] \
            if torch.cuda.is_available() else ["cpu"]
    rates: dict[str, dict[str, float | None]] = {}
    measured: dict[str, float] = {}
    for device in devices:
        rates[device] = {}
        for dtype in dtypes:
            try:
                rate = measure_matmul_tflops(device, dtype, budget_s)
            except Exception:  # noqa: BLE001 - a dtype the device cannot do at all
                rate = None
            rates[device][dtype] = rate
            if rate is not None:
                _PEAK_CACHE.setdefault(_peak_key(device, dtype), rate)
                measured[peak_cache_key(device, dtype)] = rate
    _write_peak_cache(measured)  # `amptui doctor` refreshes what runs read
    return rates


def _peak_key(device: Any, dtype: Any) -> tuple[str, str]:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return str(dev), dtype_name(dtype)


def peak_tflops(device: Any, dtype: Any, budget_s: float = 0.3) -> float:
    """The 'peak' behind "fraction of peak": the measured matmul rate of `dtype` on `device`.

    Measured once per (device model, dtype, torch version) and kept in peak_cache_path(), so a run
    does not pay for the measurement at every start (`amptui doctor` measures afresh and updates it)."""
    key = _peak_key(device, dtype)
    if key not in _PEAK_CACHE:
        stored = peak_cache_key(*key)
        rate = _read_peak_cache().get(stored)
        if rate is None:
            rate = measure_matmul_tflops(key[0], key[1], budget_s)
            _write_peak_cache({stored: rate})
        _PEAK_CACHE[key] = rate
    return _PEAK_CACHE[key]


def forget_measured_peaks() -> None:
    """Forget the peaks this process has looked up (as a new process would); the file stays."""
    _PEAK_CACHE.clear()


# --- the peak cache: {"format": 1, "peak_tflops": {"<device>|<dtype>|torch <version>": TFLOP/s}} ----

PEAK_CACHE_FORMAT = 1


def peak_cache_path() -> Path:
    """$XDG_CACHE_HOME/amptui/peak_tflops.json (default ~/.cache/amptui/peak_tflops.json)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "amptui" / "peak_tflops.json"


def peak_cache_key(device: Any, dtype: Any) -> str:
    """What a measured peak depends on: the device model (on a CPU also torch's thread count),
    the dtype and the torch version; not the device's index."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        label = torch.cuda.get_device_name(dev)
    else:
        label = f"{cpu_name()} ({torch.get_num_threads()} threads)"
    return f"{label}|{dtype_name(dtype)}|torch {torch.__version__}"


def _read_peak_cache() -> dict[str, float]:
    """The stored peaks; a missing, unreadable or damaged file (or entry) counts as none."""
    try:
        data = safefile.load_json(peak_cache_path(), 1024 * 1024)
        peaks = data["peak_tflops"] if data.get("format") == PEAK_CACHE_FORMAT else {}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
    if not isinstance(peaks, dict):
        return {}
    return {k: float(v) for k, v in peaks.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0}


read_peak_cache = _read_peak_cache  # public: machine/dtype_speed.py reads it without torch


def _write_peak_cache(updates: dict[str, float]) -> None:
    """Merge `updates` into the cache file atomically (temp file + rename), keeping the higher rate
    per key: a measurement disturbed by other work comes out low, never high, so the best one seen
    is the peak. A cache that cannot be written (read-only home) only means measuring next time."""
    if not updates:
        return
    path = peak_cache_path()
    peaks = _read_peak_cache()
    for key, rate in updates.items():
        peaks[key] = max(rate, peaks.get(key, 0.0))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safefile.atomic_write_text(path, json.dumps({"format": PEAK_CACHE_FORMAT, "peak_tflops": peaks},
                                                    indent=1, sort_keys=True))
    except OSError:
        pass
