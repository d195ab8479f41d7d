"""A GPU's roofline: how long a GEMM of a given shape takes in each precision, from the device's
dense peak FLOP/s per dtype and its memory bandwidth (standard library only).

A GEMM (M, K, N) takes the longer of its FLOPs (2 M K N) at the recipe's dense peak and its bytes
at the memory bandwidth: the inputs (M x K and K x N) and the output (M x N) at the recipe's element
size (fp32 and tf32 4 bytes, bf16 and fp16 2, fp8 and mxfp8 1 in and a bf16 output, nvfp4 half a
byte in and a bf16 output) and, for the fp8, MXFP8 and NVFP4 recipes, the cast of each bf16 input
(read 2 bytes, write the narrow element) and the block scales (MXFP8 one byte per 32 values,
NVFP4 one per 16). No overlap with other work, no kernel launch cost, no fusion, every GEMM at
its peak once it is large enough: a prediction's upper bound, said so wherever it is shown.

The figures are the vendors' datasheets, dense (the "with sparsity" figures halved):
- H100 SXM5 and H100 PCIe: NVIDIA H100 Tensor Core GPU datasheet (2023);
- H200 SXM: NVIDIA H200 datasheet (H100's compute, 4.8 TB/s HBM3e);
- B200: NVIDIA HGX B200 datasheet (per GPU: FP4 9 PFLOP/s, FP8/MXFP8 4.5, BF16 2.25, TF32 1.1 dense);
- A100 SXM 80GB: NVIDIA A100 datasheet (no FP8);
- L40S, L4, A10: NVIDIA L40S, L4 and A10 datasheets;
- RTX 4090: NVIDIA Ada Lovelace architecture whitepaper (tensor FP16/BF16 and FP8 with FP32 accumulate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from amptui.core.errors import ConfigError


@dataclass(frozen=True)
class DeviceRoof:
    name: str
    peak_tflops: Mapping[str, float] = field(hash=False)  # dense peak per recipe key; missing = no such GEMM
    mem_gbs: float
    source: str
    measured: bool = False  # built from this machine's measurement rather than a datasheet


def _roof(name: str, fp32: float, tf32: float, bf16: float, mem_gbs: float, source: str, fp8: float | None = None,
          mxfp8: float | None = None, nvfp4: float | None = None) -> DeviceRoof:
    peaks = {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": bf16}
    peaks.update({k: v for k, v in (("fp8", fp8), ("mxfp8", mxfp8), ("nvfp4", nvfp4)) if v is not None})
    return DeviceRoof(name, peaks, mem_gbs, source)


DEVICES: dict[str, DeviceRoof] = {
    "h100": _roof("H100 SXM", 67.0, 494.7, 989.4, 3350.0, "NVIDIA H100 Tensor Core GPU datasheet (SXM5)", fp8=1978.9),
    "h100pcie": _roof("H100 PCIe", 51.0, 378.0, 756.0, 2000.0, "NVIDIA H100 Tensor Core GPU datasheet (PCIe)",
                      fp8=1513.0),
    "h200": _roof("H200", 67.0, 494.7, 989.4, 4800.0, "NVIDIA H200 Tensor Core GPU datasheet (SXM)", fp8=1978.9),
    "b200": _roof("B200", 75.0, 1100.0, 2250.0, 8000.0, "NVIDIA HGX B200 datasheet, per GPU", fp8=4500.0,
                  mxfp8=4500.0, nvfp4=9000.0),
    "a100": _roof("A100 SXM 80GB", 19.5, 156.0, 312.0, 2039.0, "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB)"),
    "l40s": _roof("L40S", 91.6, 183.0, 362.05, 864.0, "NVIDIA L40S datasheet", fp8=733.0),
    "l4": _roof("L4", 30.3, 60.0, 121.0, 300.0, "NVIDIA L4 Tensor Core GPU datasheet", fp8=242.5),
    "a10": _roof("A10", 31.2, 62.5, 125.0, 600.0, "NVIDIA A10 Tensor Core GPU datasheet"),
    "rtx4090": _roof("RTX 4090", 82.6, 82.6, 165.2, 1008.0, "NVIDIA Ada Lovelace GPU architecture whitepaper",
                     fp8=330.3),
}
ALIASES = {"h100sxm": "h100", "h100sxm5": "h100", "h100pci": "h100pcie", "h200sxm": "h200", "a100sxm": "a100",
           "a10080gb": "a100", "a100sxm80gb": "a100", "a10g": "a10", "geforcertx4090": "rtx4090", "4090": "rtx4090"}

ELEMENT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp8": 1.0, "nvfp4": 0.5}
SCALE_BYTES = {"mxfp8": 1.0 / 32, "nvfp4": 1.0 / 16}  # per input element: one scale byte per block


def roof_for(name: str) -> DeviceRoof:
    """The roof of a GPU named as people write it ("H100", "h100-sxm", "A100 SXM 80GB"); an unknown
    name is a ConfigError listing the known ones."""
    key = "".join(c for c in name.lower() if c.isalnum())
    key = ALIASES.get(key, key)
    if key not in DEVICES:
        raise ConfigError(f"unknown GPU {name!r}: known are " + ", ".join(r.name for r in DEVICES.values()))
    return DEVICES[key]


def gemm_flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


def gemm_bytes(m: int, k: int, n: int, recipe: str) -> float:
    """The bytes one GEMM moves in `recipe` (see the module doc)."""
    size = ELEMENT_BYTES[recipe]
    inputs = float(m * k + k * n)
    if size >= 2:
        return (inputs + m * n) * size
    cast = inputs * (2.0 + size)  # each bf16 input read once and written narrow before the GEMM
    return inputs * (size + SCALE_BYTES.get(recipe, 0.0)) + m * n * 2.0 + cast


def gemm_seconds(roof: DeviceRoof, m: int, k: int, n: int, recipe: str) -> float:
    """max(FLOPs / the recipe's peak, bytes / bandwidth); a recipe the device lacks is a KeyError."""
    return max(gemm_flops(m, k, n) / (roof.peak_tflops[recipe] * 1e12), gemm_bytes(m, k, n, recipe) / (roof.mem_gbs * 1e9))


def gemm_speedup(roof: DeviceRoof, m: int, k: int, n: int, recipe: str, baseline: str = "bf16") -> float:
    return gemm_seconds(roof, m, k, n, baseline) / gemm_seconds(roof, m, k, n, recipe)


def layer_gemms(m: int, k: int, n: int) -> list[tuple[str, int, int, int]]:
    """A linear y = x W^T with x (m, k), W (n, k): its forward, grad-input and grad-weight GEMMs."""
    return [("forward", m, k, n), ("grad_input", m, n, k), ("grad_weight", n, m, k)]
