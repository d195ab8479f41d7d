"""`amptui doctor`: the real command on this machine, and hardware.describe()/recommend() for GPUs.

This box has no GPU and no NVIDIA driver. The real command runs here as it is (NVML missing, CPU
only). The CUDA branches are exercised by a mock that stands in only for the missing GPU: the
torch.cuda functions describe() calls (is_available, device_count, get_device_properties,
current_device, is_bf16_supported) are monkeypatched to answer like an A100 or a V100; everything
else (torch, cuDNN, the CPU, pynvml) is real."""

from __future__ import annotations

import torch

from amptui.machine import peaks


def test_peak_tflops_is_memoised(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no peaks stored by earlier runs

    def fake(device, dtype, budget_s=0.3):
        calls.append((device, dtype))
        return 1.5

    peaks.forget_measured_peaks()
    monkeypatch.setattr(peaks, "measure_matmul_tflops", fake)
    assert peaks.peak_tflops("cpu", torch.bfloat16) == 1.5
    assert peaks.peak_tflops(torch.device("cpu"), "bfloat16") == 1.5
    assert peaks.peak_tflops("cpu", "float32") == 1.5
    assert calls == [("cpu", "bfloat16"), ("cpu", "float32")]
