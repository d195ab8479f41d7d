"""What this machine offers for AMP: versions, GPUs, NVML, CPU instruction sets (`cpu_features`),
and which autocast dtype to use (with or without a GradScaler), given the matmul rates that
machine/peaks.py measures.

Torch is imported inside the functions, so importing this module stays cheap (`amptui --help`)."""

from __future__ import annotations

import platform
from typing import Any

from amptui.core.config.precision import FULL
from amptui.core.fmt import flops_unit, fmt_flops, fmt_times_as_fast
from amptui.machine import tf32
from amptui.machine.cpu import BF16_CPU_FLAGS, cpu_info

# Re-exported for callers that still import them from here (cli, console, core.tune_runner).
from amptui.machine.dtype_speed import EMULATED_BF16_NOTICE as EMULATED_BF16_NOTICE
from amptui.machine.dtype_speed import emulated_dtype_notice as emulated_dtype_notice

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
    tf32_flags = {k: v for k, v in tf32.state(torch).items() if k != "supported"}
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,          # the CUDA the wheel was built with (None: CPU build)
        "hip": getattr(torch.version, "hip", None),
        "cudnn": cudnn,
        "cuda_available": available,
        "tf32_matmul": tf32_flags["matmul"] if available else None,
        "tf32": tf32_flags,  # matmul, cudnn: what float32 may use by default here; api: which torch API
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
            "tf32": not hip and cc >= tf32.TF32_MIN_CAPABILITY,  # TF32 tensor cores: Ampere on
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


# --- recommendation ------------------------------------------------------------------------------

def recommend(info: dict[str, Any], rates: dict[str, dict[str, float | None]] | None = None,
              unsure: dict[str, str] | None = None) -> tuple[str, bool, str]:
    """(autocast dtype, use a GradScaler?, one sentence why) for this machine.

    "float32" as the dtype means: leave autocast off (a CPU with no bfloat16 instructions that
    measured no gain). `unsure`: {device: why} whose rates were not measured reliably
    (peaks.measure_checked): no ratio is said from them and the choice rests on what the hardware is."""
    rates = {d: r for d, r in (rates or {}).items() if d not in (unsure or {})}
    gpus = info.get("gpus") or []
    if gpus:
        return _recommend_gpu(gpus, rates)
    why = (unsure or {}).get("cpu")
    if why:
        dtype, scaler, reason = _recommend_cpu(info.get("cpu") or {}, {})
        said = f"matmul rates were not measured reliably ({why}), so no ratio between the dtypes is given"
        return dtype, scaler, reason.replace("matmul rates were not measured (--no-bench)", said)
    return _recommend_cpu(info.get("cpu") or {}, rates.get("cpu") or {})


def _recommend_gpu(gpus: list[dict[str, Any]], rates: dict) -> tuple[str, bool, str]:
    gpu = gpus[0]
    names = gpu["name"] if len(gpus) == 1 else f"{len(gpus)}x {gpu['name']}"
    measured = rates.get(f"cuda:{gpu['index']}") or rates.get("cuda") or {}
    speed = ""
    if measured:
        rates_of = [measured.get(d) for d in ("bfloat16", "float16", "float32")]
        unit = flops_unit(*rates_of)
        bf16, fp16, fp32 = (fmt_flops(x, unit, with_unit=False) for x in rates_of)
        speed = f" (measured matmuls: bfloat16 {bf16}, float16 {fp16}, float32 {fp32} {unit[0]})"
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
        unit = flops_unit(bf16, fp16, fp32)  # a CPU's rates read in GFLOP/s, not 0.00144 TFLOP/s
        speed = (f"measured bfloat16 matmuls run at {fmt_flops(bf16, unit)} against "
                 f"{fmt_flops(fp16, unit, with_unit=False)} for float16 and "
                 f"{fmt_flops(fp32, unit, with_unit=False)} for float32")
        if bf16 and fp32:
            speed += f" ({fmt_times_as_fast('bfloat16', bf16, 'float32', fp32)})"
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
            "so gradients do not underflow and no loss scaling is needed. " + LARGE_MATMUL_CAVEAT)


# What doctor's rates are, so a small model's "same speed" in an A/B does not read as a contradiction.
LARGE_MATMUL_CAVEAT = ("These rates are of large square matmuls: a model whose step is mostly small matmuls, "
                       "elementwise work, the optimizer or data loading gains less or nothing; `amptui ab` "
                       "measures your model and says why.")
