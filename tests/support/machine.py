"""This machine as a test pins it: the CPU's matmul rates, and device reads counted."""

from __future__ import annotations

import json
from pathlib import Path

# Every Python-level device-to-host read of a tensor: what a CPU run can count in place of CUDA's
# sync-debug mode (the `gpu` tests use that).
DEVICE_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "numpy")


def count_device_reads(monkeypatch) -> dict:
    """Wrap each read in DEVICE_READS so `counts["n"]` counts them (the mock stands in only for
    CUDA's sync-debug mode, which needs a GPU)."""
    import torch

    counts = {"n": 0}
    for name in DEVICE_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _original=original, **k):
            counts["n"] += 1
            return _original(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, counted)
    return counts


def cpu_rates_here(tmp_path: Path, monkeypatch, bfloat16: float, float16: float = 0.001,
                   float32: float = 0.085, float8: float | None = None) -> None:
    """This CPU's measured matmul rates (TFLOP/s), as the launcher caches them (this torch, this
    thread count: nothing is measured again), for this test and the processes it starts; `float8`: a
    tensorwise-scaled float8 GEMM's (measured only when asked for: the autopilot's promote_for = "here")."""
    from amptui.machine import peaks

    cache = tmp_path / "cache" / "amptui" / "peak_tflops.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"format": peaks.PEAK_CACHE_FORMAT, "peak_tflops": {
        peaks.peak_cache_key("cpu", dtype): rate
        for dtype, rate in (("bfloat16", bfloat16), ("float16", float16), ("float32", float32),
                            *((("float8_e4m3fn", float8),) if float8 is not None else ()))}}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    peaks.forget_measured_peaks()
