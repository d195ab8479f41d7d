"""A tiny scaler-lab trainer in this process (`trainer_for`), its modules and its records, for the numerics
tests."""

from __future__ import annotations

from torch import nn

from amptui.core.config import presets
from amptui.jobs import launch
from amptui.trainer.loop import Trainer

TINY = {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
        "data.batch_size": 8, "data.train_samples": 64, "data.val_samples": 0, "data.num_workers": 0,
        "amp.init_scale": 256.0, "log.every": 2, "run.epochs": 1, "log.checkpoint_every": 0}
FP16 = {"amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True}
KNOWN = "features.4"  # the small CNN's second conv


def trainer_for(runs_dir, **overrides) -> Trainer:
    run_dir, _ = launch.create_run(presets.find_preset("scaler-lab"), {**TINY, **overrides}, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    return trainer


def module(trainer: Trainer, name: str) -> nn.Module:
    return dict(trainer.state.model.named_modules())[name]


def of_kind(recs, kind):
    return [r for r in recs if r["kind"] == kind]
