"""`amptui doctor`: the real command on this machine, and hardware.describe()/recommend() for GPUs.

This box has no GPU and no NVIDIA driver. The real command runs here as it is (NVML missing, CPU
only). The CUDA branches are exercised by a mock that stands in only for the missing GPU: the
torch.cuda functions describe() calls (is_available, device_count, get_device_properties,
current_device, is_bf16_supported) are monkeypatched to answer like an A100 or a V100; everything
else (torch, cuDNN, the CPU, pynvml) is real."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest
import torch

from amptui.cli import doctor
from amptui.machine import busy as busy_mod
from amptui.machine import hardware, peaks
from amptui.machine.cpu import CPU_FLAGS
from amptui.tune import machine_notes as tune_notes


@pytest.mark.parametrize("load", [0.1, 40.0])
def test_doctor_says_when_the_machine_was_busy_as_it_measured(monkeypatch, capsys, load):
    """Under load the rates can be off by orders of magnitude (float32 at 0.0169 GFLOP/s: "bfloat16
    is 1,275 times as fast"): the report says the machine was busy and to measure again when idle,
    by the same check as tune's note."""
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(peaks, "measure_checked",
                        lambda: ({"cpu": {"float32": 0.085, "bfloat16": 0.001, "float16": 0.002}}, {}))
    doctor.run_doctor(types.SimpleNamespace(format="table", no_bench=False))
    text = capsys.readouterr().out
    busy = load > 1.5 * busy_mod.usable_cores()
    assert ("This machine was busy as it measured" in text) == busy, text
    assert ("run `amptui doctor` again when it is idle" in text) == busy
    assert bool(tune_notes.busy_note("cpu")) == busy  # the one check both use
    doctor.run_doctor(types.SimpleNamespace(format="json", no_bench=False))
    said = json.loads(capsys.readouterr().out)["busy"]
    assert said == ({"load_average": load, "cores": busy_mod.usable_cores()} if busy else None)


def test_no_bench_measures_nothing(monkeypatch, capsys):
    def boom(*a, **k):
        raise AssertionError("measured with --no-bench")

    monkeypatch.setattr(peaks, "measure_matmul_tflops", boom)
    assert doctor.run_doctor(types.SimpleNamespace(format="json", no_bench=True)) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["rates"] == {} and r["benchmarked"] is False
    assert r["recommendation"]["dtype"] in ("bfloat16", "float16", "float32")


def test_nvml_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)       # import pynvml -> ImportError
    status = hardware.nvml_status()
    assert status["available"] is False
    assert "pynvml" in status["reason"] and "nvidia-ml-py" in status["reason"]


# --- measurement ---------------------------------------------------------------------------------

def test_measure_is_positive_for_each_dtype():
    # no wall-clock bound here: a loaded box stretches any budget (the probe's growth is tested by work in
    # test_doctor_stall.py)
    for dtype in ("float32", torch.bfloat16, "fp16"):
        assert peaks.measure_matmul_tflops("cpu", dtype, budget_s=0.1) > 0


# --- recommendations (CPU) -----------------------------------------------------------------------

def _cpu_info(**flags) -> dict:
    all_flags = {f: False for f in CPU_FLAGS}
    all_flags.update(flags)
    return {"gpus": [], "cpu": {"flags": all_flags}}


def test_recommend_bf16_cpu():
    dtype, scaler, reason = hardware.recommend(
        _cpu_info(avx512_bf16=True, amx_bf16=True),
        {"cpu": {"float32": 0.3, "bfloat16": 1.2, "float16": 0.001}})
    assert (dtype, scaler) == ("bfloat16", False)
    assert "AVX512-BF16" in reason and "1.2" in reason and "GradScaler" in reason


def test_recommend_cpu_whose_bf16_flags_measured_slow_keeps_float32():
    """A CPU that reports AVX512-BF16 while torch's bfloat16 matmuls run emulated (seen on a
    virtual AMD EPYC: 0.0001 TFLOP/s against 0.017 for float32): the measurement wins."""
    dtype, scaler, reason = hardware.recommend(
        _cpu_info(avx512_bf16=True), {"cpu": {"float32": 0.017, "bfloat16": 0.000105, "float16": 0.0007}})
    assert (dtype, scaler) == ("float32", False)
    assert "reports AVX512-BF16 but torch does not run bfloat16 fast" in reason


def test_recommend_cpu_without_bf16_that_measured_no_gain_keeps_float32():
    dtype, scaler, reason = hardware.recommend(
        _cpu_info(avx2=True), {"cpu": {"float32": 0.5, "bfloat16": 0.05, "float16": 0.01}})
    assert (dtype, scaler) == ("float32", False)
    assert "no bfloat16 instructions" in reason


# --- CUDA branches: a mock stands in for the GPU this box does not have ---------------------------

A100 = dict(name="NVIDIA A100-SXM4-80GB", total_memory=80 * 2**30, major=8, minor=0, multi_processor_count=108)
V100 = dict(name="Tesla V100-SXM2-16GB", total_memory=16 * 2**30, major=7, minor=0, multi_processor_count=80)
P100 = dict(name="Tesla P100-PCIE-16GB", total_memory=16 * 2**30, major=6, minor=0, multi_processor_count=56)


@pytest.fixture
def fake_gpus(monkeypatch):
    """Make torch.cuda answer as if these GPUs were installed (only the calls describe() makes)."""
    def install(*gpus):
        props = [types.SimpleNamespace(**g) for g in gpus]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(props))
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=None: props[int(i or 0)])
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True: props[0].major >= 8)
        return hardware.describe()
    return install


def test_describe_a100(fake_gpus):
    info = fake_gpus(A100)
    (gpu,) = info["gpus"]
    assert gpu == {"index": 0, "name": A100["name"], "total_memory": 80 * 2**30, "compute_capability": "8.0",
                   "multiprocessors": 108, "tensor_cores": True, "bf16": True, "tf32": True}
    assert info["torch"]["cuda_available"] is True
    dtype, scaler, reason = hardware.recommend(info, {"cuda:0": {"float32": 19.0, "bfloat16": 250.0, "float16": 260.0}})
    assert (dtype, scaler) == ("bfloat16", False)
    assert "A100" in reason and "8.0" in reason and "250" in reason


def test_describe_v100(fake_gpus):
    info = fake_gpus(V100, V100)
    assert [g["compute_capability"] for g in info["gpus"]] == ["7.0", "7.0"]
    assert all(g["tensor_cores"] and not g["bf16"] for g in info["gpus"])
    dtype, scaler, reason = hardware.recommend(info, {})
    assert (dtype, scaler) == ("float16", True)
    assert "no bfloat16" in reason and "GradScaler" in reason and "underflow" in reason


def test_pascal_and_mixed_gpus(fake_gpus):
    dtype, scaler, reason = hardware.recommend(fake_gpus(P100), {})
    assert (dtype, scaler) == ("float16", True) and "no tensor cores" in reason
    # One GPU without bfloat16 decides for a job spread over all of them.
    dtype, scaler, reason = hardware.recommend(fake_gpus(A100, V100), {})
    assert (dtype, scaler) == ("float16", True) and "V100" in reason


def test_text_report_for_a_gpu_box(fake_gpus):
    r = fake_gpus(A100)
    r["rates"] = {"cpu": {"float32": 0.3, "bfloat16": 1.2, "float16": 0.3},
                  "cuda:0": {"float32": 19.0, "bfloat16": 250.0, "float16": None}}
    r["benchmarked"] = True
    dtype, scaler, reason = hardware.recommend(r, r["rates"])
    r["recommendation"] = {"dtype": dtype, "autocast": True, "grad_scaler": scaler, "reason": reason}
    text = doctor.render_text(r)
    assert "cuda:0  NVIDIA A100-SXM4-80GB  80.0 GiB  compute capability 8.0  tensor cores: yes  bf16: yes" in text
    assert "Recommendation: autocast bfloat16, no GradScaler" in text
    assert "n/a" in text      # a dtype that could not be measured


def test_doctor_says_torchvisions_compiled_ops_load_with_this_torch():
    """Issue 51.12: this machine's real pair, checked by running one compiled op (nms)."""
    from amptui.machine import visionops

    found = visionops.state()
    assert found["installed"] and found["ok"] is True, found
    line = visionops.words(found, torch.__version__, torch.version.cuda)
    assert line.startswith("torchvision ") and "compiled ops load" in line
