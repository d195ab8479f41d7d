"""Why the first non-finite step was not finite, said without asking for sampling (issue 43): amptui's
trainer replays the failing step's batch (fetched again from the data) and records a cause on the event
stream: `input`, `precision_overflow` or `float32_too`, with advice that fits it. In process, tiny models."""

from __future__ import annotations

import textwrap

import pytest
import torch
from support.records import events

from amptui.core.config import presets
from amptui.jobs import launch
from amptui.trainer.loop import Trainer

pytestmark = pytest.mark.timeout(300)

TINY = {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
        "data.batch_size": 16, "data.val_samples": 0, "data.num_workers": 0, "log.every": 4, "run.epochs": 1,
        "log.checkpoint_every": 0}

NAN_AT_200 = '''
import torch
from torch.utils.data import Dataset

class Images(Dataset):
    """Seeded images; item 200's first pixel is NaN (a corrupt file, as a user's loader may hand over)."""
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        x = torch.randn(3, 16, 16, generator=torch.Generator().manual_seed(i))
        if i == 200:
            x[0, 0, 0] = float("nan")
        return x, i % 10

def data(train_samples):
    return Images(train_samples), None
'''


def causes(run_dir):
    return [r["cause"] for r in events(run_dir) if r["kind"] == "warning" and r.get("code") == "nonfinite_cause"]


def train(run_dir) -> Trainer:
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    try:
        trainer.finish(trainer.train())
    except BaseException as exc:
        trainer.finish("failed", exc)
        raise
    return trainer


def test_a_nan_in_dataset_item_200_is_named_as_the_input(runs_dir, isolated):
    (isolated / "nan_data.py").write_text(textwrap.dedent(NAN_AT_200))
    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), {
        **TINY, "data.factory": "nan_data:data", "data.train_samples": 320, "amp.autocast": False}, runs_dir)
    train(run_dir)
    found = causes(run_dir)
    assert len(found) == 1 and found[0]["cause"] == "input", found
    assert found[0]["tensor"] == "inputs" and found[0]["items"] == [200]
    said = [r["message"] for r in events(run_dir) if r.get("code") == "nonfinite_cause"][0]
    assert "dataset items 200" in said and "data loader" in said


def test_a_module_past_float16s_range_is_named_with_keep_it_out_of_float16(runs_dir):
    run_dir, _ = launch.create_run(presets.find_preset("scaler-lab"), {
        **TINY, "data.train_samples": 128, "amp.init_scale": 256.0}, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    with torch.no_grad():  # the second conv's output far past float16's 65,504 (about 4e6), from the start
        dict(trainer.state.model.named_modules())["features.4"].weight.mul_(1e6)
    trainer.finish(trainer.train())
    found = causes(run_dir)
    assert len(found) == 1 and found[0]["cause"] == "precision_overflow", found
    assert found[0]["module"].startswith("features.") and found[0]["dtype"] == "float16"
    said = [r["message"] for r in events(run_dir) if r.get("code") == "nonfinite_cause"][0]
    assert "finite in float32" in said and "out of float16" in said and "bfloat16" in said


def test_a_healthy_run_looks_for_no_cause(runs_dir):
    run_dir, _ = launch.create_run(presets.find_preset("scaler-lab"), {**TINY, "data.train_samples": 64}, runs_dir)
    train(run_dir)
    assert causes(run_dir) == []


def test_an_unmodified_scripts_float16_overflow_names_its_module(runs_dir):
    """Issue 43 finding 1: 29 of 30 steps skipped and "check the data"; now the module is named, unasked."""
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "fp16_overflow.py", log_every=2)
    assert error is None
    found = causes(run_dir)
    assert len(found) == 1, [r for r in recs if r["kind"] == "warning"]
    # named on the first step record by replaying its batch (issue 51.5), with what the check saw
    assert {k: found[0].get(k) for k in ("cause", "module", "where", "dtype", "traced")} == {
        "cause": "precision_overflow", "module": "2.lin", "where": "forward", "dtype": "float16", "traced": True}
    assert found[0]["value"] > 65504 and found[0]["step"] == 2
    said = [r["message"] for r in recs if r.get("code") == "nonfinite_cause"][0]
    assert "keep 2.lin out of float16" in said
    assert not [r for r in recs if r["kind"] == "numerics" and r["step"] > found[0]["step"] + 8]  # sampling ended
