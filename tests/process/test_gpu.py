"""On a CUDA machine: what amptui promises there, with real runs on the GPU (`python -m pytest -q
-m gpu`; see docs/testing.md). Every test here is marked `gpu` and skips without CUDA, except the
`any_device` ones, which assert this machine's default device, whatever it is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from support.cli import amptui
from support.records import events, only_run

SHORT = ["--set", "run.max_steps=30", "--set", "log.every=5", "--set", "log.tensorboard=false"]


def steps_of(run_dir):
    return [r for r in events(run_dir) if r["kind"] == "step"]


# --- this machine's default ---------------------------------------------------------------------

@pytest.mark.slow  # a real run (on a CPU: autocast bfloat16, which this kind of CPU may only emulate)
@pytest.mark.any_device
def test_auto_picks_this_machines_default_device_and_dtype(runs_dir):
    amptui("run", "quickstart", *SHORT, check=True)
    start = events(only_run(runs_dir))[0]
    if torch.cuda.is_available():
        assert start["device"]["type"] == "cuda"
        assert start["precision"]["words"] == "autocast float16 + GradScaler"
    else:
        assert start["device"]["type"] == "cpu"
        from amptui.machine.dtype_speed import slow_dtypes  # bfloat16 unless this CPU computes it slowly

        assert start["precision"]["words"] == ("fp32" if "bfloat16" in slow_dtypes("cpu") else "autocast bfloat16")


# --- CUDA ---------------------------------------------------------------------------------------

@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
def test_cuda_step_records_carry_allocator_memory(runs_dir):
    amptui("run", "quickstart", "--set", "run.device=cuda", *SHORT, check=True)
    run_dir = only_run(runs_dir)
    assert events(run_dir)[0]["device"]["type"] == "cuda"
    for rec in steps_of(run_dir):
        mem = rec["mem"]
        assert {"allocated", "reserved", "peak_allocated"} <= set(mem)
        assert 0 < mem["allocated"] <= mem["reserved"] and mem["allocated"] <= mem["peak_allocated"]


@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
def test_nvml_samples_in_mem_records(runs_dir):
    # long enough for the sampler's 2 s period to come round
    amptui("run", "quickstart", "--set", "run.device=cuda", "--set", "run.epochs=3",
           "--set", "log.tensorboard=false", check=True)
    samples = [r for r in events(only_run(runs_dir)) if r["kind"] == "mem"]
    assert samples, "no mem record"
    devices = [d for r in samples for d in r["devices"]]
    assert devices, "NVML gave no device sample (is nvidia-ml-py installed and the driver loaded?)"
    for d in devices:
        assert 0 < d["used"] <= d["total"] and 0 <= d["util"] <= 100
        assert d["index"] < torch.cuda.device_count()


@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
def test_ddp_over_nccl_one_process_per_gpu(runs_dir):
    n = torch.cuda.device_count()
    amptui("run", "quickstart", "--set", "run.device=cuda", "--set", "dist.mode=ddp",
           "--set", f"dist.nproc_per_node={n}", *SHORT, check=True)
    run_dir = only_run(runs_dir)
    start = events(run_dir)[0]
    assert start["world_size"] == n and start["config"]["dist"]["backend"] == "nccl"
    assert events(run_dir)[-1]["status"] == "completed"
    for rank in range(1, n):
        assert events(run_dir, f"events.rank{rank}.jsonl")[-1]["status"] == "completed"
    # one GPU per process: more processes than GPUs is refused before anything starts
    refused = amptui("run", "quickstart", "--set", "run.device=cuda", "--set", "dist.mode=ddp",
                     "--set", f"dist.nproc_per_node={n + 1}")
    assert refused.returncode == 2 and "one process per GPU" in refused.stderr


@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
def test_doctor_on_cuda_reports_each_gpu():
    info = json.loads(amptui("doctor", "--format", "json", "--no-bench", check=True).stdout)
    assert info["torch"]["cuda_available"] is True and info["torch"]["cuda"]
    assert len(info["gpus"]) == torch.cuda.device_count()
    gpu = info["gpus"][0]
    assert gpu["name"] == torch.cuda.get_device_name(0)
    assert gpu["compute_capability"] == "{}.{}".format(*torch.cuda.get_device_capability(0))
    assert gpu["bf16"] == torch.cuda.is_bf16_supported(including_emulation=False)
    text = amptui("doctor", "--no-bench", check=True).stdout
    assert torch.cuda.get_device_name(0) in text


@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
def test_ab_resnet18_fp16_beats_fp32_at_batch_256(runs_dir):
    """The tutorials' headline on a GPU: ResNet-18 at batch 256, synthetic images (no download)."""
    proc = subprocess.run(
        [sys.executable, "-m", "amptui", "ab", "resnet18-intel", "--variants", "fp32,fp16+scaler", "--format", "json",
         "--set", "data.name=synthetic", "--set", "data.train_samples=20480", "--set", "data.val_samples=0",
         "--set", "data.img_size=224", "--set", "data.num_workers=8", "--set", "model.pretrained=false",
         "--set", "run.max_steps=60", "--set", "log.every=5", "--set", "log.tensorboard=false"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(proc.stdout[proc.stdout.index("\n[\n"):])  # after the progress lines
    fp32, fp16 = rows
    assert fp32["precision"] == "fp32" and fp16["precision"] == "autocast float16 + GradScaler"
    assert fp16["speedup"] > 1.2, rows
    assert fp16["peak_mem"] < fp32["peak_mem"], rows


FLOAT8_GPU = not torch.cuda.is_available() or torch.cuda.get_device_capability(0) < (8, 9)


@pytest.mark.slow  # the real CLI or an A/B as a process
@pytest.mark.gpu
@pytest.mark.skipif(FLOAT8_GPU, reason="float8 GEMMs need compute capability 8.9+ (Ada, Hopper, Blackwell)")
def test_ab_fp8_rowwise_beats_bf16_on_a_large_compiled_mlp(runs_dir):
    """float8 where torchao says it wins: GEMMs of 8192 x 8192 x 8192 (the recipe MLP at width 8192,
    batch 8192, six linears of which the four inner ones convert), compiled (uncompiled, the casts
    eat the gain). Four fixed batches made on the GPU (2 GiB), reused over the epochs."""
    pytest.importorskip("torchao", reason="amp.float8 needs torchao (pip install 'amptui[fp8]')")
    proc = subprocess.run(
        [sys.executable, "-m", "amptui", "ab", "mlp-recipe", "--variants", "bf16,fp8-rowwise", "--format", "json",
         "--set", "run.device=cuda", "--set", "model.width=8192", "--set", "model.depth=6",
         "--set", "data.batch_size=8192", "--set", "data.train_samples=32768", "--set", "run.epochs=15",
         "--set", "run.max_steps=60", "--set", "run.compile=true", "--set", "log.every=5",
         "--set", "log.checkpoint_every=0", "--set", "log.tensorboard=false"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(proc.stdout[proc.stdout.index("\n[\n"):])  # after the progress lines
    bf16, fp8 = rows
    assert bf16["precision"] == "autocast bfloat16" and fp8["precision"] == "autocast bfloat16 + float8 rowwise"
    assert fp8["speedup"] > 1.0, rows  # float8 faster than bfloat16 on the same steps
    runs = sorted(p for p in runs_dir.iterdir() if p.is_dir())
    converted = events(runs[-1])[0]["precision"]["float8"]
    assert converted["converted"] == 4 and converted["emulated"] is False, converted
