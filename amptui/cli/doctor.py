"""`amptui doctor`: what this machine offers for AMP and which dtype to use.

No torch at import time (machine/hardware.py and peaks.py import it inside their functions).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from amptui.core.config.precision import FULL
from amptui.core.fmt import flops_unit, fmt_flops
from amptui.machine import cputorch, hardware, peaks, visionops


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="what this machine offers for AMP, and which dtype to use")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--no-bench", action="store_true", help="skip the matmul measurements")


def handle(args) -> int:
    return run_doctor(args)

def collect(bench: bool = True) -> dict[str, Any]:
    from amptui.machine.busy import busy_load

    info = hardware.describe()
    info["torchvision"] = visionops.state()  # its compiled ops load with this torch, or why not
    busy = busy_load() if bench else None  # before measuring: other work's load, not doctor's own threads
    rates, unsure = peaks.measure_checked() if bench else ({}, {})
    dtype, scaler, reason = hardware.recommend(info, rates, unsure)
    info["rates"] = rates            # {device: {dtype: TFLOP/s}}; {} with --no-bench
    info["unreliable"] = unsure      # {device: why its rates' ratios are not stood behind (a control disagreed)}
    info["benchmarked"] = bench
    info["busy"] = {"load_average": round(busy[0], 2), "cores": busy[1]} if busy else None
    info["recommendation"] = {"dtype": dtype, "autocast": dtype != FULL, "grad_scaler": scaler,
                              "reason": reason}
    return info


def run_doctor(args, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = collect(bench=not getattr(args, "no_bench", False))
    if getattr(args, "format", "table") == "json":
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        from amptui.cli.prose import say

        say(render_text(report).rstrip("\n") + "\n", out)  # wrapped at word boundaries on a terminal
    return 0


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def _yes(flag: Any) -> str:
    return "yes" if flag else "no"


def _cudnn(v: int | None) -> str:
    if not v:
        return "none"
    # cuDNN 9+: major*10000 + minor*100 + patch; cuDNN 8: major*1000 + minor*100 + patch
    major, rest = (v // 10000, v % 10000) if v >= 10000 else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def render_text(r: dict[str, Any]) -> str:
    t, cpu, nvml = r["torch"], r["cpu"], r["nvml"]
    lines = ["PyTorch",
             f"  torch {t['version']}   CUDA build {t['cuda'] or 'none (CPU-only build)'}"
             + (f"   ROCm/HIP {t['hip']}" if t.get("hip") else "")
             + f"   cuDNN {_cudnn(t['cudnn'])}",
             f"  CUDA available: {_yes(t['cuda_available'])}   CPU threads: {t['threads']}",
             *_tf32_lines(t),
             *([f"  {visionops.words(r['torchvision'], t['version'], t['cuda'])}"] if r.get("torchvision") else []),
             "", "GPUs"]
    if r["gpus"]:
        for g in r["gpus"]:
            lines.append(f"  cuda:{g['index']}  {g['name']}  {_gib(g['total_memory'])}  compute capability "
                         f"{g['compute_capability']}  tensor cores: {_yes(g['tensor_cores'])}  bf16: {_yes(g['bf16'])}"
                         + (f"  tf32: {_yes(g['tf32'])}" if "tf32" in g else ""))
    else:
        lines.append("  none" + ("" if t["cuda"] else " (this torch build has no CUDA)")
                     + ("" if t["cuda_available"] or not t["cuda"] else " (no usable CUDA device or driver)"))
        note = cputorch.note_words(t["cuda"], t["cuda_available"])
        if note:
            lines.append(f"  {note[0].upper()}{note[1:]}")
    lines += ["", "NVML (GPU telemetry)"]
    if nvml["available"]:
        lines.append(f"  available: driver {nvml.get('driver')}, {nvml.get('devices')} device(s)")
    else:
        lines.append(f"  not available: {nvml['reason']}")
        lines.append("  (GPU memory/utilisation panels fall back to torch's own counters; CPU runs do not need it)")
    flags = cpu["flags"]
    lines += ["", "CPU",
              f"  {cpu['model']}   {cpu['cores']} cores ({cpu['usable_cores']} usable)   "
              f"torch kernels: {cpu['capability'] or '-'}",
              "  " + "  ".join(f"{name}={_yes(flags.get(name))}" for name in  # a pair never wraps apart
                               ("avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16", "avx512f", "f16c")),
              ""]
    # one unit for the table, the one its largest rate reads in (a CPU's are GFLOP/s)
    unit = flops_unit(*(v for rates in r["rates"].values() for v in rates.values()))
    lines.append(f"Measured matmul rates ({unit[0]}, square matrices)")
    if not r["benchmarked"]:
        lines.append("  skipped (--no-bench)")
    else:
        dtypes = peaks.MEASURED_DTYPES
        lines.append("  " + f"{'device':<10}" + "".join(f"{d:>11}" for d in dtypes))
        for device, rates in r["rates"].items():
            cells = "".join(f"{fmt_flops(rates.get(d), unit, with_unit=False):>11}" for d in dtypes)
            lines.append("  " + f"{device:<10}" + cells)
        for device, why in (r.get("unreliable") or {}).items():
            lines.append(f"  {device}: not measured reliably ({why}); no ratio between its dtypes is given: run "
                         "`amptui doctor` again when the machine is idle.")
        busy = r.get("busy")
        if busy:
            lines.append(f"  This machine was busy as it measured (load average {busy['load_average']:.0f} on "
                         f"{busy['cores']} cores): these rates, and the recommendation from them, may be off; "
                         "run `amptui doctor` again when it is idle.")
    rec = r["recommendation"]
    setup = ("autocast " + rec["dtype"] + (" + GradScaler" if rec["grad_scaler"] else ", no GradScaler")
             if rec["autocast"] else "float32, autocast off")
    lines += ["", f"Recommendation: {setup}",
              f"  {rec['reason']}",
              f"  (try it: amptui run quickstart {_sets(rec)})", ""]
    return "\n".join(lines)


def _tf32_lines(t: dict[str, Any]) -> list[str]:
    """What an fp32 run gets by default here: TF32 for CUDA matmuls / cuDNN convolutions or not."""
    flags = t.get("tf32")
    if not isinstance(flags, dict):
        return []
    on = {True: "on", False: "off"}
    return [f"  TF32 by default: matmuls {on[bool(flags.get('matmul'))]}, cuDNN convolutions "
            f"{on[bool(flags.get('cudnn'))]} (torch's {flags.get('api')} API)",
            "  amp.tf32 = true / false sets both" + ("" if t["cuda_available"] else "; CUDA only: no effect here")]


def _sets(rec: dict[str, Any]) -> str:
    if not rec["autocast"]:
        return "--set amp.autocast=false"
    return (f"--set amp.autocast=true --set amp.dtype={rec['dtype']} "
            f"--set amp.grad_scaler={'true' if rec['grad_scaler'] else 'false'}")
