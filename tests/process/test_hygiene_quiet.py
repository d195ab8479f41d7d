"""Precision hygiene raises no false alarm (issue 53): the built-in presets through the real Trainer,
and the real-shaped scripts amptui watches (tests/scripts) under the hooks, every step sampled,
say none of its findings."""

from __future__ import annotations

import pytest
from support.records import events

from amptui.core import hygiene
from amptui.core.config import presets
from amptui.jobs import launch
from amptui.trainer.loop import Trainer

pytestmark = pytest.mark.timeout(600)

SAMPLED = {"numerics.hygiene_every": 1}
STEPS = 4
# every preset at toy size on a CPU, on synthetic data where it reads a dataset
SMALL = {"run.device": "cpu", "run.reuse_host_memory": False, "data.batch_size": 4, "data.num_workers": 0,
         "data.val_samples": 0, "log.every": 2, "run.epochs": 1, "log.checkpoint_every": 0}
PER_PRESET = {
    "alexnet-cifar10": {"data.name": "synthetic", "data.img_size": 64, "data.train_samples": 32},
    "resnet18-intel": {"data.name": "synthetic", "data.img_size": 32, "data.train_samples": 32,
                       "model.pretrained": False},
    "mlp-recipe": {"model.width": 64, "data.train_samples": 32},
    "quickstart": {"data.train_samples": 32},
    "scaler-lab": {"data.train_samples": 32},
}


def hygiene_codes(recs) -> dict[str, str]:
    return {r["code"]: r["message"] for r in recs if r["kind"] == "warning" and r.get("code") in hygiene.CODES}


def preset_names() -> list[str]:
    return [p.name for p in presets.list_presets() if p.builtin]


@pytest.mark.slow
@pytest.mark.parametrize("name", preset_names())
@pytest.mark.parametrize("precision", [{}, {"amp.autocast": True, "amp.dtype": "bfloat16"}])
def test_the_presets_raise_no_hygiene_finding(runs_dir, name, precision):
    overrides = {**SMALL, **PER_PRESET.get(name, {}), **precision, **SAMPLED}
    run_dir, _ = launch.create_run(presets.find_preset(name), overrides, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
    try:
        for _ in range(STEPS):
            trainer.train_step(batches)
        trainer.write_step_record()
    finally:
        trainer.finish("completed")
    assert hygiene_codes(events(run_dir)) == {}
