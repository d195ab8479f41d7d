"""Presets that name user code: `model.factory` / `data.factory` imported from the working
directory, trained by the real `amptui run` (also under DDP on the CPU), and every way a factory
can be broken giving one line that names the factory string."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import amptui
from support.factories import _broken, write
from support.records import events, only_run

TINY_MODEL = '''
import json, os
from torch import nn

def build(num_classes, hidden=8):
    with open("factory_calls.jsonl", "a") as fh:   # what amptui passed, one line per call (per rank)
        fh.write(json.dumps({"num_classes": num_classes, "hidden": hidden, "rank": os.environ.get("RANK")}) + "\\n")
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
'''

PRESET = '''
[run]
epochs = 1
[model]
factory = "tiny_model:build"
num_classes = 4
hidden = 12          # not an amptui key: goes to build(hidden=12)
[data]
name = "synthetic"
img_size = 8
batch_size = 32
train_samples = 256
val_samples = 64
[log]
every = 2
checkpoint_every = 0
'''


def calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "factory_calls.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_model_factory_from_the_working_directory_trains(isolated, runs_dir):
    write(isolated / "tiny_model.py", TINY_MODEL)
    write(isolated / "custom.toml", PRESET)
    proc = amptui("run", "custom.toml", check=True)
    run_dir = only_run(runs_dir)
    assert proc.stdout.strip().splitlines()[-1] == f"run {run_dir.name}: completed"
    recs = events(run_dir)
    start = recs[0]
    assert start["config"]["model"]["factory"] == "tiny_model:build"
    assert start["config"]["model"]["args"] == {"hidden": 12}
    assert calls(isolated) == [{"num_classes": 4, "hidden": 12, "rank": None}]
    steps = [r for r in recs if r["kind"] == "step"]
    assert steps and all(r["loss"] is not None for r in steps)
    epoch = [r for r in recs if r["kind"] == "epoch"][-1]
    assert epoch["val_acc"] is not None  # integer labels: CrossEntropy and accuracy
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed"


@pytest.mark.slow
def test_model_factory_trains_under_ddp_on_the_cpu(isolated, runs_dir):
    write(isolated / "tiny_model.py", TINY_MODEL)
    write(isolated / "custom.toml", PRESET)
    amptui("run", "custom.toml", "--set", "dist.mode=ddp", "--set", "dist.nproc_per_node=2", check=True)
    run_dir = only_run(runs_dir)
    recs, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    assert recs[0]["world_size"] == 2 and recs[-1]["status"] == "completed"
    assert rank1[-1]["kind"] == "end" and rank1[-1]["rank"] == 1
    assert sorted(c["rank"] for c in calls(isolated)) == ["0", "1"]
    assert all(c["hidden"] == 12 for c in calls(isolated))


@pytest.mark.slow
def test_model_factory_under_ab(isolated, runs_dir):
    write(isolated / "tiny_model.py", TINY_MODEL)
    write(isolated / "custom.toml", PRESET)
    proc = amptui("ab", "custom.toml", "--variants", "fp32,bf16", "--format", "json", check=True)
    table = json.loads(proc.stdout[proc.stdout.index("\n[\n"):])
    assert [row["precision"] for row in table] == ["fp32", "autocast bfloat16"]
    assert all(row["status"] == "completed" and row["val_acc"] is not None for row in table)
    assert len(calls(isolated)) == 2  # one model per variant, from the user's factory


REGRESSION = '''
import torch
from torch import nn
from torch.utils.data import TensorDataset

def data(seed, train_samples):            # amptui passes the settings it names
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(train_samples, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    return TensorDataset(x, x @ w), None   # float targets: MSE; no validation set

def model(width=16):
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 1))
'''


@pytest.mark.slow
def test_data_factory_with_float_targets_trains_with_mse(isolated, runs_dir):
    write(isolated / "regress.py", REGRESSION)
    write(isolated / "regress.toml", '''
        [run]
        epochs = 2
        [model]
        factory = "regress:model"
        width = 32
        [data]
        factory = "regress:data"
        batch_size = 32
        train_samples = 256
        [optim]
        lr = 0.01
        [log]
        every = 4
        checkpoint_every = 0
    ''')
    amptui("run", "regress.toml", check=True)
    recs = events(only_run(runs_dir))
    steps = [r for r in recs if r["kind"] == "step"]
    assert steps[-1]["loss"] < steps[0]["loss"], "MSE on a linear target falls"
    assert all(r["val_acc"] is None for r in recs if r["kind"] == "epoch")
    assert recs[-1]["status"] == "completed"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing module", "missing function", "import raising", "bad keyword"])
def test_broken_factory_on_the_command_line_exit_2_no_traceback_no_run_folder(isolated, runs_dir, case):
    ref, message = _broken(isolated, case)
    extra = "hidden = 3\n" if case == "bad keyword" else ""
    write(isolated / "broken.toml", f'[model]\nfactory = "{ref}"\n{extra}')
    proc = amptui("run", "broken.toml")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and f'"{ref}"' in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


@pytest.mark.slow
def test_a_factory_that_raises_while_training_fails_the_run_with_its_line(isolated, runs_dir):
    """Calling the factory happens in the trainer: the run ends failed, with the one line, and
    the log holds no traceback of amptui's own."""
    ref, message = _broken(isolated, "call raising")
    write(isolated / "broken.toml", f'[model]\nfactory = "{ref}"\n[data]\nimg_size = 8\ntrain_samples = 64\n')
    proc = amptui("run", "broken.toml")
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and message in end["error"]["message"]
    assert "Traceback" not in (run_dir / "output.log").read_text()
