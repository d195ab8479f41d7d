"""The input pipeline: synthetic data made on the training device, the prefetcher, the time the
loop waits for data (and the input-bound notice it leads to), data.num_workers = "auto"."""

from __future__ import annotations

import json

import pytest
from support.cli import amptui
from support.records import events, only_run

from amptui.core.config import values as cfgmod
from amptui.core.inputbound import INPUT_BOUND_SHARE


@pytest.mark.slow
def test_config_toml_holds_an_int_and_bad_values_name_the_key(runs_dir):
    proc = amptui("run", "quickstart", "--set", "run.device=cpu", "--set", "run.max_steps=1",
                  "--set", "data.train_samples=64", "--set", "data.val_samples=0")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    config = cfgmod.read_toml(only_run(runs_dir) / "config.toml")
    assert config["data"]["num_workers"] == 0            # synthetic: made on the device
    proc = amptui("run", "quickstart", "--set", 'data.num_workers="lots"')
    assert proc.returncode == 2 and "data.num_workers" in proc.stderr and "Traceback" not in proc.stderr


SLOW_DATA = """
import time
import torch
from torch.utils.data import Dataset


class Images(Dataset):
    def __init__(self, n, delay):
        g = torch.Generator().manual_seed(0)
        self.x, self.y, self.delay = torch.randn(n, 3, 32, 32, generator=g), torch.arange(n) % 10, delay

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i], int(self.y[i])


def slow():
    return Images(48, 0.1), None


def fast():
    return Images(48, 0.0), None
"""


def run_with(factory: str, runs_dir, width: int = 16):
    proc = amptui("run", "quickstart", "--set", "run.device=cpu", "--set", f'data.factory="{factory}"',
                  "--set", "data.batch_size=8", "--set", "data.num_workers=0", "--set", "run.epochs=1",
                  "--set", "log.every=1", "--set", f"model.width={width}", "--set", "amp.autocast=false",
                  "--runs-dir", str(runs_dir))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    steps = [r for r in events(only_run(runs_dir)) if r["kind"] == "step"]
    share = sum(r["data_wait_ms"] for r in steps) / sum(r["step_time_ms"] for r in steps)
    return proc.stdout, steps, share


@pytest.mark.slow
def test_a_slow_dataset_makes_the_run_say_input_bound(isolated):
    (isolated / "pipe_data.py").write_text(SLOW_DATA)
    out, steps, share = run_with("pipe_data:slow", isolated / "slow")
    assert len(steps) == 6 and all(r["data_wait_ms"] >= 8 * 100 * 0.9 for r in steps)   # 8 samples x 100 ms
    assert share >= INPUT_BOUND_SHARE   # the step itself is slow on a loaded 2-core machine
    assert f"input-bound: the CPU waited for data {100 * share:.0f}% of the time" in out, out
    run_id = only_run(isolated / "slow").name
    table = amptui("compare", run_id, "--runs-dir", str(isolated / "slow"), check=True).stdout
    assert "data wait" in table and "(input-bound)" in table and "input-bound: the CPU waited" in table
    row = json.loads(amptui("compare", run_id, "--runs-dir", str(isolated / "slow"), "--format", "json",
                            check=True).stdout)[0]
    assert row["data_wait"] == pytest.approx(share, rel=0.05) and row["input_bound"].startswith("input-bound")

    # Collating 8 samples costs about a millisecond, a width-16 step only a few on a fast CPU: the
    # wider model keeps the step well above the data wait however loaded the machine is.
    out, steps, share = run_with("pipe_data:fast", isolated / "fast", width=64)
    assert share < 0.2 and "input-bound" not in out, out
