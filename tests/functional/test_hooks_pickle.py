"""Hooks leave the model picklable whatever sampling is on (issue 51.9): `torch.save(model)`, `pickle` and
`copy.deepcopy` work while the range sampler or the plan probe has its hooks on the model, and a copy's
hooks do nothing (they hold none of amptui's state). In process, tiny models."""

from __future__ import annotations

import copy
import io
import pickle

import torch
from torch import nn

from amptui.telemetry.numerics import RangeSampler
from amptui.telemetry.plan_probe import PlanProbe


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8)), nn.Linear(8, 1))


def test_a_model_under_the_range_sampler_saves_pickles_and_copies():
    model = tiny()
    sampler = RangeSampler(model, every=1, depth=2, dtype="float32", device=torch.device("cpu"))
    sampler.prepare(1, None)  # the hooks are on the model now, as between two sampled steps
    assert any(m._forward_hooks for m in model.modules())
    torch.save(model, io.BytesIO())
    again = pickle.loads(pickle.dumps(model))
    twin = copy.deepcopy(model)
    for other in (again, twin):  # a copy runs; its hooks add nothing to the sampler's step
        other(torch.randn(2, 8)).sum().backward()
    assert sampler.current is not None and sampler.current.forward_order == []
    model(torch.randn(2, 8)).sum().backward()
    assert sampler.current.forward_order  # the model's own hooks still sample
    sampler.step_done()


def test_a_model_under_the_plan_probe_saves_and_pickles():
    model = tiny()
    probe = PlanProbe(model, 1)
    probe.prepare(1)
    torch.save(model, io.BytesIO())
    pickle.dumps(model)
    copy.deepcopy(model)(torch.randn(2, 8))
    probe.cancel()


def test_a_script_saving_its_model_every_step_under_numerics_every_1(runs_dir, capsys):
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "saves_each_step.py", log_every=1, sets={"numerics.every": 1})
    assert error is None, error
    assert "saved every step" in capsys.readouterr().out
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed"
    assert [r for r in recs if r["kind"] == "numerics"]  # sampling was on while it saved
