"""`amptui doctor`'s matmul probe on a busy machine (issue 51 item 3): "bfloat16 is 119 times as fast as
float32" where a plain torch.mm measured 4.5x, because the probe stopped growing when a small product
stalled and then measured the stall. The probe grows by work (never judges a size below MIN_SIZE by a
timing), repeats and keeps the best; a control (float32 measured again after the other dtypes) whose gap
leaves a ratio too noisy to tell (figures.speed_call, the one speed verdict) makes doctor say "not
measured reliably" instead of a ratio."""

from __future__ import annotations

import json
import time
import types

import torch

from amptui.cli import doctor
from amptui.machine import hardware, peaks

STALL_S = 0.2  # far longer than any 256x256 float32 product here, loaded or not


def test_a_stall_of_the_first_products_neither_stops_the_growth_nor_is_measured(monkeypatch):
    """A stand-in for a scheduler stall (the machine cannot stall on demand): torch.mm's first six calls
    each take STALL_S longer, as a descheduled thread's would, on the clock the probe reads (peaks'
    time.perf_counter, moved on by STALL_S: what a stall is to the probe, not waited out here). The
    old probe stopped at 64x64 and timed only stalled products (a rate of one product per STALL_S)."""
    real_mm, sizes, calls, stalled = torch.mm, [], [], [0.0]

    def stalling_mm(a, b):
        calls.append(1)
        sizes.append(a.shape[0])
        if len(calls) <= 6:
            stalled[0] += STALL_S
        return real_mm(a, b)

    monkeypatch.setattr(torch, "mm", stalling_mm)
    monkeypatch.setattr(peaks, "time", types.SimpleNamespace(perf_counter=lambda: time.perf_counter() + stalled[0]))
    rate = peaks.measure_matmul_tflops("cpu", "float32", budget_s=0.1)
    n = max(sizes)
    assert min(sizes) >= peaks.MIN_SIZE["cpu"], sizes
    per_product_s = 2.0 * n ** 3 / (rate * 1e12)
    assert per_product_s < STALL_S / 2, (n, per_product_s)  # the best batch, not the stall


def test_a_control_that_disagrees_leaves_no_ratio_only_not_measured_reliably(monkeypatch, capsys):
    """A stand-in for a machine whose speed changed mid-measurement: float32 measures 0.1 TFLOP/s first
    and 0.02 as the control after the other dtypes."""
    seen: list[str] = []

    def fake(device, dtype, budget_s=0.3):
        seen.append(peaks.dtype_name(dtype))
        if peaks.dtype_name(dtype) == "float32":
            return 0.1 if seen.count("float32") == 1 else 0.02
        return 0.4

    monkeypatch.setattr(peaks, "measure_matmul_tflops", fake)
    monkeypatch.setattr(peaks, "_write_peak_cache", lambda updates: None)  # keep the user's cache as it is
    rates, unsure = peaks.measure_checked(devices=["cpu"])
    assert seen[0] == "float32" and seen[-1] == "float32" and rates["cpu"]["float32"] == 0.1
    assert unsure["cpu"] == ("float32 measured 100 GFLOP/s, then 20 after the other dtypes: the machine's speed "
                             "changed as it measured, more than bfloat16, float16 differs from float32")
    # judged as every speed verdict (figures.speed_call): a ratio clear of the control's gap stands
    assert peaks.unreliable(0.1, 0.11) is None
    assert peaks.unreliable(0.0169, 0.013, {"bfloat16": 0.0768}) is None  # 4.5x against a 1.3x wobble
    assert "more than bfloat16 differs" in peaks.unreliable(0.0169, 0.013, {"bfloat16": 0.0203})  # 1.2x: inside it

    monkeypatch.setattr(peaks, "measure_checked", lambda: (rates, unsure))
    doctor.run_doctor(types.SimpleNamespace(format="table", no_bench=False))
    text = " ".join(capsys.readouterr().out.split())
    assert "cpu: not measured reliably (float32 measured 100 GFLOP/s, then 20" in text
    assert "times as fast" not in text and "matmul rates were not measured reliably" in text
    doctor.run_doctor(types.SimpleNamespace(format="json", no_bench=False))
    assert json.loads(capsys.readouterr().out)["unreliable"] == unsure


def test_a_steady_control_keeps_the_ratio():
    _, _, reason = hardware.recommend({"cpu": {"flags": {"amx_bf16": True}}},
                                      {"cpu": {"bfloat16": 0.0768, "float16": 0.0007, "float32": 0.0169}}, {})
    assert "bfloat16 is 4.5 times as fast as float32" in reason
