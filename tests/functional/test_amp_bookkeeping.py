"""Unit tests of the trainer's AMP bookkeeping with a real GradScaler on the CPU (float16, tiny)."""


import pytest
import torch
from torch import nn

from amptui.trainer import checkpoint


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_checkpoint_round_trip_is_atomic_and_weights_only(tmp_path):
    model = tiny_model()
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    checkpoint.save(tmp_path, {"model": model.state_dict(), "scaler": scaler.state_dict(),
                               "rng": checkpoint.rng_state(), "progress": {"step": 7}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no temp file left
    state = checkpoint.load(tmp_path)
    assert state["scaler"]["scale"] == 256.0 and state["progress"]["step"] == 7
    checkpoint.set_rng_state(state["rng"])


class RunsCode:
    def __reduce__(self):
        return (exec, ("open('pwned', 'w').write('x')",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path, isolated):
    torch.save({"model": RunsCode()}, tmp_path / "last.pt")
    with pytest.raises(Exception):
        checkpoint.load(tmp_path)
    assert not (isolated / "pwned").exists()
