"""What this machine offers for AMP: versions, GPUs, NVML, CPU instruction sets (`cpu_features`),
measured matmul rates per dtype, and which autocast dtype to use (with or without a GradScaler).

Torch is imported inside the functions, so importing this module stays cheap (`amptui --help`)."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from amptui.core import safefile
from amptui.core.config.precision import DTYPES, FULL
from amptui.machine.cpu import BF16_CPU_FLAGS, cpu_info, cpu_name

# Re-exported for callers that still import them from here (cli, console, core.tune_runner).
from amptui.machine.cpu import EMULATED_BF16_NOTICE as EMULATED_BF16_NOTICE
from amptui.machine.cpu import emulated_dtype_notice as emulated_dtype_notice

# What the doctor measures: float32 and every autocast dtype (by name).
MEASURED_DTYPES = (FULL, *sorted(DTYPES))

_ALIASES = {"fp32": FULL, "float": FULL, FULL: FULL, "half": "float16",
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


# --- describe ------------------------------------------------------------------------------------

def describe() -> dict[str, Any]:
    """Everything `amptui doctor` reports, as plain JSON-able data."""
    import torch

    info: dict[str, Any] = {
        "torch": _torch_info(torch),
        "gpus": _gpus(torch),
        "nvml": nvml_status(),
        "cpu": cpu_info(torch),
        "os": {"platform": platform.platform(), "python": platform.python_version()},
    }
    return info


def _torch_info(torch) -> dict[str, Any]:
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001 - a broken cuDNN install is reported as "none"
        cudnn = None
    available = bool(torch.cuda.is_available())
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,          # the CUDA the wheel was built with (None: CPU build)
        "hip": getattr(torch.version, "hip", None),
        "cudnn": cudnn,
        "cuda_available": available,
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32) if available else None,
        "threads": torch.get_num_threads(),
    }


def _gpus(torch) -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    hip = bool(getattr(torch.version, "hip", None))
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        cc = (int(props.major), int(props.minor))
        gpus.append({
            "index": index,
            "name": props.name,
            "total_memory": int(props.total_memory),
            "compute_capability": f"{cc[0]}.{cc[1]}",
            "multiprocessors": int(getattr(props, "multi_processor_count", 0) or 0),
            # Tensor cores arrived with Volta (7.0); bfloat16 in hardware with Ampere (8.0).
            "tensor_cores": hip or cc >= (7, 0),
            "bf16": hip or cc >= (8, 0),
        })
    if gpus:
        # torch's own answer for the current device (no emulation: emulated bf16 is slow).
        try:
            current = torch.cuda.current_device()
            gpus[current]["bf16"] = bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except Exception:  # noqa: BLE001 - keep the compute-capability answer
            pass
    return gpus


def nvml_status() -> dict[str, Any]:
    """NVML (GPU telemetry for the memory/utilisation panels): available, or why not."""
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": f"pynvml not importable ({type(exc).__name__}: {exc}); "
                                              "install nvidia-ml-py"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - e.g. NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = int(pynvml.nvmlDeviceGetCount())
        return {"available": True, "reason": None,
                "driver": driver.decode() if isinstance(driver, bytes) else str(driver), "devices": count}
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


# --- measurement ---------------------------------------------------------------------------------

def measure_matmul_tflops(device: Any = "cpu", dtype: Any = "float32", budget_s: float = 0.3) -> float:
    """Achieved TFLOP/s of square matmuls of `dtype` on `device`, in about `budget_s` seconds.

    The size grows from 64 while a single product stays cheap (so a dtype that is slow on this
    device, like float16 on most CPUs, stays tiny), capped at 1024 on a CPU (cache-friendly) and
    8192 on a GPU; then batches of products are timed and the best batch counts, so a stray stall
    of the OS scheduler does not pull the number down. CUDA is synchronised around every timing."""
    import torch

    dev = torch.device(device)
    tdtype = getattr(torch, dtype_name(dtype))
    cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    cap = 8192 if cuda else 1024
    probe_target = budget_s / 16
    # Our own generator: measuring inside a training process must not move the global RNG.
    gen = torch.Generator(device=dev).manual_seed(0)

    def operands(n: int):
        a = torch.empty(n, n, device=dev, dtype=tdtype).uniform_(-1, 1, generator=gen)
        b = torch.empty(n, n, device=dev, dtype=tdtype).uniform_(-1, 1, generator=gen)
        return a, b

    def timed(a, b, k: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(k):
            torch.mm(a, b)
        sync()
        return time.perf_counter() - t0

    with torch.no_grad():
        n = 64
        a, b = operands(n)
        timed(a, b, 1)                  # lazy init (CUDA context, cuBLAS, thread pool) is not timed
        deadline = time.perf_counter() + budget_s
        # Grow while a product still takes under the probe target, so a dtype this device is slow
        # at stays small (the last probe costs at most ~8x the target). Each size is judged by its
        # best of three products: small ones can stall for several milliseconds on a busy or
        # virtual CPU (thread wake-ups), whatever their size, and a stall must not stop the growth
        # at a size that measures only the stall.
        while True:
            timed(a, b, 1)              # warm-up at this size
            per_call = timed(a, b, 1)
            for _ in range(2):
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
        for _ in range(2):
            best = min(best, timed(a, b, k) / k)
        while time.perf_counter() < deadline:
            best = min(best, timed(a, b, k) / k)
    del a, b
    return flops / best / 1e12


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


# --- recommendation ------------------------------------------------------------------------------

def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3g}"


def recommend(info: dict[str, Any], rates: dict[str, dict[str, float | None]] | None = None
              ) -> tuple[str, bool, str]:
    """(autocast dtype, use a GradScaler?, one sentence why) for this machine.

    "float32" as the dtype means: leave autocast off (a CPU with no bfloat16 instructions that
    measured no gain)."""
    rates = rates or {}
    gpus = info.get("gpus") or []
    if gpus:
        return _recommend_gpu(gpus, rates)
    return _recommend_cpu(info.get("cpu") or {}, rates.get("cpu") or {})


def _recommend_gpu(gpus: list[dict[str, Any]], rates: dict) -> tuple[str, bool, str]:
    gpu = gpus[0]
    names = gpu["name"] if len(gpus) == 1 else f"{len(gpus)}x {gpu['name']}"
    measured = rates.get(f"cuda:{gpu['index']}") or rates.get("cuda") or {}
    speed = ""
    if measured:
        speed = (f" (measured matmuls: bfloat16 {_fmt_rate(measured.get('bfloat16'))}, float16 "
                 f"{_fmt_rate(measured.get('float16'))}, float32 {_fmt_rate(measured.get('float32'))} TFLOP/s)")
    if all(g.get("bf16") for g in gpus):
        return ("bfloat16", False,
                f"bfloat16 without a GradScaler: {names} (compute capability {gpu['compute_capability']}) "
                f"runs bfloat16 on its tensor cores{speed}, and bfloat16 keeps float32's exponent range, "
                "so small gradients do not underflow and no loss scaling is needed.")
    oldest = min(gpus, key=lambda g: tuple(int(p) for p in g["compute_capability"].split(".")))
    cc = oldest["compute_capability"]
    if all(g.get("tensor_cores") for g in gpus):
        why = (f"{oldest['name']} (compute capability {cc}) has float16 tensor cores but no bfloat16 "
               "support (that needs 8.0+)")
    else:
        why = (f"{oldest['name']} (compute capability {cc}) has no tensor cores and no bfloat16, so "
               "float16 mostly saves memory and bandwidth rather than compute")
    return ("float16", True,
            f"float16 with a GradScaler: {why}{speed}, and float16's narrow range makes small gradients "
            "underflow to zero unless the loss is scaled.")


def _recommend_cpu(cpu: dict[str, Any], measured: dict[str, float | None]) -> tuple[str, bool, str]:
    flags = cpu.get("flags") or {}
    have = [f for f in BF16_CPU_FLAGS if flags.get(f)]
    bf16, fp16, fp32 = (measured.get(d) for d in ("bfloat16", "float16", "float32"))
    pretty = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}
    if measured:
        speed = (f"measured bfloat16 matmuls run at {_fmt_rate(bf16)} TFLOP/s against {_fmt_rate(fp16)} "
                 f"for float16 and {_fmt_rate(fp32)} for float32")
        if bf16 and fp32:
            speed += f" (bfloat16 at {bf16 / fp32:.2g}x float32's speed)"
    else:
        speed = "matmul rates were not measured (--no-bench)"
    if measured and bf16 is not None and fp32 and bf16 < 0.9 * fp32:
        # The flags alone are not enough: a torch build or a virtual CPU may still emulate bfloat16.
        had = (f"this CPU reports {' and '.join(pretty[f] for f in have)} but torch does not run bfloat16 "
               "fast on it" if have else "this CPU has no bfloat16 instructions")
        return (FULL, False,
                f"float32 (autocast off): {had}, and {speed}, so autocast would save memory but cost time; "
                "float16 is not worth it on a CPU either.")
    if have:
        hw = " and ".join(pretty[f] for f in have)
        lead = f"this CPU has {hw}"
    else:
        lead = "this CPU has no bfloat16 instructions (expect memory savings more than speed)"
    return ("bfloat16", False,
            f"bfloat16 without a GradScaler: {lead}, {speed}, and bfloat16 keeps float32's exponent range, "
            "so gradients do not underflow and no loss scaling is needed.")
