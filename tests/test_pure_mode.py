"""A precision mode added as a module, and only that: `bf16-pure` (amptui/core/modes/pure.py and
amptui/trainer/modes/pure.py): parameters, gradients and optimizer state in bfloat16, no float32
master copy, with stochastic rounding of the optimizer's update as an option. It trains from a
preset, `ab` and `tune` offer it, the script hooks recognise a loop that cast its model to bfloat16,
and compare shows its precision and memory. Its name is written in no other module of amptui."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from support.cli import amptui, one_clear_line
from support.paths import REPO, SCRIPTS
from support.records import events, only_run

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import UserError
from amptui.core.prepare import preflight
from amptui.trainer.modes.pure import StochasticAdam

SCRIPT = SCRIPTS / "cast_bf16.py"
TINY = {"model": {"name": "mlp", "width": 16, "depth": 2}, "data": {"name": "random", "batch_size": 4,
        "train_samples": 16, "val_samples": 0}, "run": {"device": "cpu", "max_steps": 2}}


def test_its_variants_are_offered_and_read_back():
    assert {"bf16-pure", "bf16-pure+sr"} <= set(ab.known_variants()) and "bf16-pure" in ab.variants_help()
    assert "bf16-pure" in modes.tune_variants()  # tune tries it too
    for name in ("bf16-pure", "bf16-pure+sr"):
        p = Precision.from_variant(name)
        assert p.short == name and p.autocast_dtype == "bfloat16" and not p.scaler
        assert Precision.from_record(p.as_record()) == p and Precision.from_record(p.words) == p
        assert Precision.from_config(config.build_config({}, p.overrides()), "cuda") == p  # "auto" dtypes aside
    assert Precision.from_variant("bf16-pure") != Precision.from_variant("bf16")
    assert Precision.from_variant("bf16-pure").words == "bfloat16 parameters and optimizer state, no float32 master copy"
    with pytest.raises(ValueError):
        Precision.from_variant("fp16-pure")  # float16's range needs a float32 master: not offered


def test_a_preset_picks_it_by_name_and_auto_is_the_wide_dtype_on_any_device():
    cfg = config.build_config({"amp": {"mode": "pure"}})
    assert Precision.from_config(cfg, "cuda").short == "bf16-pure"  # not float16, CUDA's auto
    assert Precision.from_config(config.build_config({"amp": {"mode": "pure", "stochastic_round": True}}),
                                 "cpu").short == "bf16-pure+sr"


@pytest.mark.parametrize("keys, said", [
    ({"amp.dtype": "float16"}, 'amp.mode = "pure" with amp.dtype = "float16"'),
    ({"dist.mode": "fsdp"}, 'amp.mode = "pure" with dist.mode = "fsdp"'),
    ({"amp.layers": {"*": "fp32"}}, 'amp.mode = "pure" with [amp.layers]'),
])
def test_what_it_cannot_do_is_refused_before_a_run(keys, said):
    cfg = config.build_config({"amp": {"mode": "pure"}}, keys)
    with pytest.raises(UserError, match=said.replace("[", "\\[").replace("]", "\\]")):
        preflight.check_precision(cfg)


def test_the_script_hooks_read_a_model_cast_to_bfloat16():
    facts = modes.LoopFacts(param_dtype="bfloat16")
    assert modes.detect(facts) == {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.mode": "pure"}
    assert modes.detect(modes.LoopFacts(param_dtype="float32")) == {"amp.autocast": False}


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


def test_stochastic_rounding_keeps_updates_that_round_to_nearest_loses():
    """1e-4 steps on weights of 1.0 are below bfloat16's last bit (2**-7): to nearest every one is
    lost, stochastically they add up to what float32 would have (within the noise of 10,000 values)."""
    def trained(optimizer_of):
        p = torch.nn.Parameter(torch.ones(10_000, dtype=torch.bfloat16))
        opt = optimizer_of([p])
        for _ in range(50):
            p.grad = torch.ones_like(p)
            opt.step()
        return p.float().mean().item()

    assert trained(lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.0)) == 1.0
    assert trained(lambda ps: StochasticAdam(ps, lr=1e-4, weight_decay=0.0, decoupled=True, seed=0)) == \
        pytest.approx(1 - 50 * 1e-4, abs=2e-4)


def test_its_name_is_written_in_its_own_files_only():
    out = subprocess.run(["grep", "-rlE", "bf16.pure|bf16_pure", "amptui", "--include=*.py"], cwd=REPO,
                         capture_output=True, text=True).stdout.split()
    assert len(out) <= 3 and all("/modes/" in f for f in out), out


@pytest.mark.slow  # three tiny trainer runs
def test_ab_runs_fp32_bf16_and_bf16_pure_and_compare_shows_each_precision_and_memory(runs_dir):
    proc = amptui("ab", "quickstart", "--variants", "fp32,bf16,bf16-pure", "--set", "run.device=cpu",
                  "--set", "run.max_steps=2", "--set", "model.width=8", "--set", "data.batch_size=8",
                  "--set", "data.train_samples=32", "--set", "data.val_samples=0", timeout=600, check=True)
    assert "[3/3] bf16-pure" in proc.stdout
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert sorted(r["precision"] for r in listed) == ["bf16", "bf16-pure", "fp32"]
    ids = [r["run_id"] for r in sorted(listed, key=lambda r: r["started"])]
    table = json.loads(amptui("compare", *ids, "--format", "json", check=True).stdout)
    rows = table["runs"] if isinstance(table, dict) else table
    shown = {row["precision"]: row for row in rows}
    assert set(shown) == {"fp32", "autocast bfloat16",
                          "bfloat16 parameters and optimizer state, no float32 master copy"}, shown
    assert all(row["peak_mem"] for row in rows)  # each one's memory, the saving against fp32 beside it
    start = events(next(runs_dir / i for i in ids if "pure" in json.dumps(events(runs_dir / i)[0]["precision"])))[0]
    assert start["precision"]["mode"] == "pure"


@pytest.mark.slow  # one script run
def test_a_script_that_casts_its_model_to_bfloat16_records_bf16_pure(runs_dir):
    amptui("run", "--script", str(SCRIPT), "--", "--steps", "3", check=True)
    run = only_run(runs_dir)
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert [r["precision"] for r in listed] == ["bf16-pure"]
    assert events(run)[0]["kind"] == "start"


def test_an_unknown_mode_is_refused_in_one_line(cli, runs_dir):
    line = one_clear_line(cli("run", "quickstart", "--set", "amp.mode=nonsense"))
    assert "amp.mode" in line and "pure" in line
