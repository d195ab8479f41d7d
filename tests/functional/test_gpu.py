"""On a CUDA machine: what amptui promises there, with real runs on the GPU (`python -m pytest -q
-m gpu`; see docs/testing.md). Every test here is marked `gpu` and skips without CUDA, except the
`any_device` ones, which assert this machine's default device, whatever it is."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.gpu
def test_cnns_train_channels_last_on_cuda(runs_dir):
    """The trainer's own setup, in this process: convolution weights in channels_last on CUDA."""
    from amptui.core.config.presets import find_preset
    from amptui.jobs import launch
    from amptui.trainer.loop import Trainer

    run_dir, _ = launch.create_run(find_preset("quickstart"), {"run.device": "cuda", "log.tensorboard": False})
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    convs = [p for p in trainer.state.model.parameters() if p.dim() == 4]
    assert convs and all(p.is_cuda and p.is_contiguous(memory_format=torch.channels_last) for p in convs)
