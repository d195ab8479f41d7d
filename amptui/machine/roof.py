"""This machine's roofline, from its measured matmul rates: what the autopilot's promote rule predicts
the gain on with `promote_for = "here"` (a device the datasheet table of core/planning/roofline.py lacks,
or a CPU). The rates are machine/peaks.py's, cached per device, dtype and torch (`amptui doctor`
measures bfloat16; float8, a tensorwise-scaled GEMM, is measured the first time it is asked for).
No memory term: every GEMM at the rate of a large square one, an upper bound as the datasheet
rooflines are."""

from __future__ import annotations

from typing import Any

from amptui.core.planning.roofline import DeviceRoof


def measured_roof(device: Any) -> tuple[DeviceRoof | None, str | None]:
    """(the roof of `device` from its bfloat16 and float8 matmul rates, None) or (None, why it has none)."""
    import torch

    from amptui.machine import peaks

    dev = torch.device(device)
    try:
        rates = {"bf16": peaks.peak_tflops(dev, "bfloat16"), "fp8": peaks.peak_tflops(dev, peaks.FLOAT8)}
    except Exception as exc:  # noqa: BLE001 - no float8 GEMM on this device (or torch): no such roof
        return None, f"no float8 GEMM measured on {dev.type} ({type(exc).__name__}: {exc})"
    return DeviceRoof(f"this {dev.type} (measured rates)", rates, float("inf"),
                      "this machine's measured matmul rates (amptui doctor's cache), no memory term",
                      measured=True), None
