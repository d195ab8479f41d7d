"""A precision mode added as a module, and only that: `bf16-pure` (amptui/core/modes/pure.py and
amptui/trainer/modes/pure.py): parameters, gradients and optimizer state in bfloat16, no float32
master copy, with stochastic rounding of the optimizer's update as an option. It trains from a
preset, `ab` and `tune` offer it, the script hooks recognise a loop that cast its model to bfloat16,
and compare shows its precision and memory. Its name is written in no other module of amptui."""

from __future__ import annotations

import subprocess

import torch
from support.cli import one_clear_line
from support.paths import REPO

from amptui.core.config import values as config
from amptui.trainer.modes.pure import StochasticAdam

TINY = {"model": {"name": "mlp", "width": 16, "depth": 2}, "data": {"name": "random", "batch_size": 4,
        "train_samples": 16, "val_samples": 0}, "run": {"device": "cpu", "max_steps": 2}}


def _state(**amp):
    from amptui.trainer.state import build_state

    class Dist:
        rank, local_rank, world_size, enabled = 0, 0, 1, False

    cfg = config.build_config({**TINY, "amp": {"mode": "pure", **amp}})
    return build_state(cfg, Dist(), torch.device("cpu"), lambda line: None)  # type: ignore[arg-type]


def _one_step(state):
    x, y = next(iter(state.train_data.batches(0)))
    with state.autocast():
        loss = state.criterion(state.forward(x), y)
    loss.backward()
    state.optimizer.step()


def test_the_trainer_keeps_parameters_gradients_and_optimizer_state_in_bfloat16():
    state = _state()
    [(_, done)] = state.conversions
    assert done.record() == {"dtype": "bfloat16", "values": sum(p.numel() for p in state.model.parameters()),
                             "stochastic_round": False}
    _one_step(state)
    params = list(state.model.parameters())
    assert {p.dtype for p in params} == {torch.bfloat16} and {p.grad.dtype for p in params} == {torch.bfloat16}
    moments = [t for s in state.optimizer.state.values() for t in s.values() if torch.is_tensor(t) and t.numel() > 1]
    assert moments and {t.dtype for t in moments} == {torch.bfloat16}  # no float32 copy anywhere
    assert state.precision.as_record()["pure"] == {"stochastic_round": False}


def test_stochastic_rounding_steps_with_its_own_optimizer():
    state = _state(stochastic_round=True)
    assert isinstance(state.optimizer, StochasticAdam)
    _one_step(state)
    assert {p.dtype for p in state.model.parameters()} == {torch.bfloat16}


def test_its_name_is_written_in_its_own_files_only():
    out = subprocess.run(["grep", "-rlE", "bf16.pure|bf16_pure", "amptui", "--include=*.py"], cwd=REPO,
                         capture_output=True, text=True).stdout.split()
    assert len(out) <= 3 and all("/modes/" in f for f in out), out


def test_an_unknown_mode_is_refused_in_one_line(cli, runs_dir):
    line = one_clear_line(cli("run", "quickstart", "--set", "amp.mode=nonsense"))
    assert "amp.mode" in line and "pure" in line
