"""`amptui doctor`: the real command on this machine, and hardware.describe()/recommend() for GPUs.

This box has no GPU and no NVIDIA driver. The real command runs here as it is (NVML missing, CPU
only). The CUDA branches are exercised by a mock that stands in only for the missing GPU: the
torch.cuda functions describe() calls (is_available, device_count, get_device_properties,
current_device, is_bf16_supported) are monkeypatched to answer like an A100 or a V100; everything
else (torch, cuDNN, the CPU, pynvml) is real."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import types

import pytest
import torch
from support.cli import amptui

from amptui.cli import doctor
from amptui.machine import busy as busy_mod
from amptui.machine import hardware, peaks
from amptui.machine.cpu import CPU_FLAGS
from amptui.tune import machine_notes as tune_notes

cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the CPU-only report")


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


# --- the real command ----------------------------------------------------------------------------

def _expected(rates: dict) -> str:
    """What the recommendation must follow on a CPU-only box: the measured rates, not the flags
    (a CPU that reports AVX512-BF16 may still run torch's bfloat16 matmuls emulated)."""
    return "bfloat16" if rates["bfloat16"] >= 0.9 * rates["float32"] else "float32"


@pytest.mark.slow  # the real `amptui doctor` / a fresh interpreter
@cpu_only
def test_doctor_text_recommends_what_the_measured_rates_say():
    proc = amptui("doctor", timeout=120)
    assert proc.returncode == 0, proc.stderr
    _no_traceback(proc)
    out = proc.stdout
    for section in ("PyTorch", "GPUs", "NVML", "CPU", "Measured matmul rates", "Recommendation"):
        assert f"\n{section}" in "\n" + out, section
    assert f"torch {torch.__version__}" in out
    gpus = out.split("\nGPUs\n", 1)[1].split("\n\n", 1)[0]
    assert gpus.strip().startswith("none")
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("cpu "))
    f32, bf16, f16 = (float(v) for v in row[1:4])
    assert min(f32, bf16, f16) > 0          # printed with the digits it needs, never 0.000
    sentence = out.split("Recommendation:", 1)[1]
    if "cpu: not measured reliably" in out:  # the control disagreed (a busy machine): no ratio, said so (issue 51)
        assert "matmul rates were not measured reliably" in sentence and "times as fast" not in sentence
        return
    assert re.search(r"measured bfloat16 matmuls run at [0-9.e-]+ [TGM]FLOP/s against [0-9.e-]+ for float16", sentence)
    if _expected({"float32": f32, "bfloat16": bf16}) == "bfloat16":
        assert "Recommendation: autocast bfloat16, no GradScaler" in out
        assert "no loss scaling is needed" in out
    else:
        assert "Recommendation: float32, autocast off" in out
        assert "would save memory but cost time" in out


@pytest.mark.slow  # the real `amptui doctor` / a fresh interpreter
@cpu_only
def test_doctor_json_has_the_fields():
    proc = amptui("doctor", "--format", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    _no_traceback(proc)
    r = json.loads(proc.stdout)
    assert r["torch"]["version"] == torch.__version__
    assert r["torch"]["cuda"] == torch.version.cuda
    assert "cudnn" in r["torch"]
    assert r["gpus"] == []
    assert set(r["nvml"]) >= {"available", "reason"}
    cpu = r["cpu"]
    assert cpu["cores"] >= 1 and cpu["model"]
    assert set(cpu["flags"]) >= {"avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16", "avx512f", "f16c"}
    assert cpu["capability"] == torch.backends.cpu.get_cpu_capability()
    rates = r["rates"]["cpu"]
    assert set(rates) == {"float32", "bfloat16", "float16"}
    assert all(v > 0 for v in rates.values())
    rec = r["recommendation"]
    expected = _expected(rates)
    if "cpu" in (r.get("unreliable") or {}):
        # the float32 control disagreed (a busy machine, CI's): no ratio is stood behind, so the choice is
        # the one made without measuring (--no-bench's), whatever the rates happen to say
        expected = hardware.recommend({"cpu": cpu})[0]
        assert "not measured reliably" in rec["reason"], rec
    assert (rec["dtype"], rec["grad_scaler"], rec["autocast"]) == (expected, False, expected != "float32")
    assert rec["reason"].count(".") >= 1 and "\n" not in rec["reason"]


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


@pytest.mark.slow  # the real `amptui doctor` / a fresh interpreter
def test_doctor_no_bench_says_so():
    proc = amptui("doctor", "--no-bench", timeout=60)
    assert proc.returncode == 0, proc.stderr
    _no_traceback(proc)
    assert "skipped (--no-bench)" in proc.stdout   # and nothing measured: test_no_bench_measures_nothing
    assert "Recommendation:" in proc.stdout


def test_no_bench_measures_nothing(monkeypatch, capsys):
    def boom(*a, **k):
        raise AssertionError("measured with --no-bench")

    monkeypatch.setattr(peaks, "measure_matmul_tflops", boom)
    assert doctor.run_doctor(types.SimpleNamespace(format="json", no_bench=True)) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["rates"] == {} and r["benchmarked"] is False
    assert r["recommendation"]["dtype"] in ("bfloat16", "float16", "float32")


@pytest.mark.slow  # the real `amptui doctor` / a fresh interpreter
def test_nvml_missing_is_reported_cleanly():
    """Here the NVIDIA driver (libnvidia-ml) is absent: NVML is reported unavailable, with why."""
    try:
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - the expected case here
        pass
    proc = amptui("doctor", "--no-bench", timeout=60)
    _no_traceback(proc)
    assert "not available: NVMLError" in proc.stdout or "pynvml not importable" in proc.stdout
    status = hardware.nvml_status()
    assert status["available"] is False and status["reason"]


def test_nvml_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)       # import pynvml -> ImportError
    status = hardware.nvml_status()
    assert status["available"] is False
    assert "pynvml" in status["reason"] and "nvidia-ml-py" in status["reason"]


@pytest.mark.slow  # the real `amptui doctor` / a fresh interpreter
def test_importing_does_not_import_torch():
    code = "import sys, amptui.machine.hardware, amptui.machine.peaks, amptui.cli.doctor; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- measurement ---------------------------------------------------------------------------------

def test_measure_is_quick_and_positive():
    for dtype in ("float32", torch.bfloat16, "fp16"):
        t0 = time.perf_counter()
        rate = peaks.measure_matmul_tflops("cpu", dtype, budget_s=0.1)
        assert rate > 0
        assert time.perf_counter() - t0 < 2.0


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


@pytest.mark.slow  # the real `amptui doctor`, with a stand-in torchvision on its PYTHONPATH
def test_doctor_names_a_torchvision_that_does_not_load_and_the_line_that_mends_it(tmp_path):
    """A mismatched torchvision (built for another torch) is what this machine lacks: a stand-in package on
    PYTHONPATH raises the error such a build raises on import. doctor names it, and the matching-pair line."""
    fake = tmp_path / "torchvision"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    proc = amptui("doctor", "--no-bench", env={"PYTHONPATH": str(tmp_path)}, timeout=200)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "does not work with torch" in text and "operator torchvision::nms does not exist" in text
    assert "install a matching pair: pip install --force-reinstall torch torchvision" in text
