"""TF32: `amp.tf32` (auto / true / false), set with torch's current API where it exists and read back
whichever API answers; the `tf32` A/B variant (CUDA only: one line, exit 2 on a CPU); the start
record's state; the fp32 baseline's TF32 in compare and tune; doctor's line."""

from __future__ import annotations

import pytest
import torch
from support.cli import amptui
from support.records import events, only_run

pytestmark = pytest.mark.timeout(300)


# --- on a GPU ------------------------------------------------------------------------------------

SHORT = ["--set", "run.max_steps=10", "--set", "log.every=5", "--set", "run.epochs=1"]


@pytest.mark.gpu
@pytest.mark.slow
def test_ab_fp32_tf32_on_cuda_records_each_runs_tf32_state(runs_dir):
    proc = amptui("ab", "quickstart", "--variants", "fp32,tf32", *SHORT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    starts = {}
    for run in runs_dir.iterdir():
        if run.is_dir() and not run.name.startswith("."):
            start = events(run)[0]
            starts[start["precision"]["short"]] = start
    assert set(starts) == {"fp32", "tf32"}
    supported = torch.cuda.get_device_capability() >= (8, 0)
    assert starts["fp32"]["tf32"] == {"matmul": False, "cudnn": False, "api": starts["fp32"]["tf32"]["api"],
                                      "supported": supported}
    assert starts["tf32"]["tf32"]["matmul"] is True and starts["tf32"]["tf32"]["cudnn"] is True
    assert starts["tf32"]["precision"]["words"] == "fp32 + TF32"
    if supported:
        assert "fp32 baseline" in proc.stdout and "TF32 matmuls off, TF32 cuDNN convolutions off" in proc.stdout


@pytest.mark.gpu
@pytest.mark.slow
def test_start_record_carries_torchs_default_tf32_state_on_cuda(runs_dir):
    amptui("run", "quickstart", "--set", "amp.autocast=false", *SHORT, check=True)
    start = events(only_run(runs_dir))[0]
    assert start["device"]["type"] == "cuda"
    assert (start["tf32"]["matmul"], start["tf32"]["cudnn"]) == (False, True)  # amp.tf32 = auto
    assert start["tf32"]["supported"] is (torch.cuda.get_device_capability() >= (8, 0))
