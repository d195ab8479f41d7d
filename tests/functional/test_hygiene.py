"""Precision hygiene (issue 53): each silent precision mistake runs in a small real loop recorded by
amptui.Monitor (the trainer and the script hooks share the same telemetry sampler) and is named with
its layer; the same loop corrected gets no warning."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from support.dashboard import app_for, async_test, settled, until
from support.records import events
from torch import nn

import amptui
from amptui.core import hygiene
from amptui.dashboard.screens.run.screen import RunScreen

STEPS = 8


def warnings_of(run_dir) -> dict[str, str]:
    return {r["code"]: r["message"] for r in events(run_dir) if r["kind"] == "warning" and r.get("code") in hygiene.CODES}


def run_loop(run_dir, model, opt, step, *, scaler=None, config=None, steps=STEPS) -> dict[str, str]:
    """`step(i)` runs one training step and returns its loss; every step sampled."""
    config = {"numerics.hygiene_every": 1, **(config or {})}
    with amptui.Monitor("hygiene", optimizer=opt, model=model, scaler=scaler, run_dir=run_dir, config=config,
                        log_every=4) as mon:
        for i in range(steps):
            mon.step(step(i))
    return warnings_of(run_dir)


def norm_model(dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 1)).to(dtype)


def plain_step(model, opt, dtype=None, autocast=None):
    def step(_i):
        x = torch.randn(8, 16, dtype=dtype or torch.float32)
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


def test_pure_bfloat16_adamw_at_a_small_lr_names_the_norm_whose_updates_round_away(runs_dir, cli):
    model = norm_model(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    said = run_loop(runs_dir / "pure", model, opt, plain_step(model, opt, torch.bfloat16))
    assert set(said) == {hygiene.UPDATES_LOST}
    message = said[hygiene.UPDATES_LOST]
    assert "1.weight" in message and "bfloat16 rounding" in message and "float32 master weights" in message

    model = norm_model()  # corrected: float32 master weights, bfloat16 compute under autocast
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    assert run_loop(runs_dir / "mixed", model, opt, plain_step(model, opt, autocast=torch.bfloat16)) == {}

    # counted where runs are listed and compared
    listed = {r["run_id"]: r["hygiene"] for r in json.loads(cli("runs", "--format", "json", check=True).stdout)}
    assert listed == {"pure": [hygiene.UPDATES_LOST], "mixed": []}
    table = cli("compare", "mixed", "pure", check=True).stdout
    assert "pure has 1 precision-hygiene finding (updates_lost)" in table and "mixed has" not in table


def test_float16_weights_and_moments_under_autocast_are_said_once_with_their_share(runs_dir):
    model = norm_model(torch.float16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)
    said = run_loop(runs_dir / "half", model, opt, plain_step(model, opt, torch.float16, autocast=torch.float16))
    assert hygiene.MASTER_16BIT in said and hygiene.EPS_VANISHES not in said
    message = said[hygiene.MASTER_16BIT]
    assert "100% of the parameters" in message and "0.weight" in message and "exp_avg_sq" in message

    model = norm_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)
    assert run_loop(runs_dir / "fp32", model, opt, plain_step(model, opt, autocast=torch.float16)) == {}


def test_adam_eps_below_what_float16_state_holds_is_named(runs_dir):
    model = norm_model(torch.float16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-8)
    said = run_loop(runs_dir / "eps", model, opt, plain_step(model, opt, torch.float16))
    assert hygiene.EPS_VANISHES in said
    assert "Adam: eps=1e-08 is zero in float16" in said[hygiene.EPS_VANISHES]

    model = norm_model()  # corrected: float32 state
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-8)
    assert run_loop(runs_dir / "eps32", model, opt, plain_step(model, opt)) == {}


def test_gradients_unscaled_twice_are_named_against_the_loss_scale(runs_dir):
    def loop(name, divide_again):
        model = norm_model()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)

        def step(_i):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(torch.randn(8, 16)).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            if divide_again:  # the loop's own unscaling, on top of the scaler's
                for p in model.parameters():
                    p.grad.div_(scaler.get_scale())
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            return loss.detach()
        return run_loop(runs_dir / name, model, opt, step, scaler=scaler)

    said = loop("twice", True)
    assert hygiene.GRAD_SCALE_WRONG in said and "unscaled twice" in said[hygiene.GRAD_SCALE_WRONG]
    assert "2**-16" in said[hygiene.GRAD_SCALE_WRONG]
    said = loop("once", False)
    assert hygiene.GRAD_SCALE_WRONG not in said, said


def test_gradients_the_optimizer_steps_on_still_scaled_are_named(runs_dir):
    """The loop scales its loss but steps the optimizer itself: nothing ever unscales."""
    model = norm_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)

    def step(_i):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randn(8, 16)).float().pow(2).mean()
        scaler.scale(loss).backward()
        opt.step()  # not scaler.step(opt)
        opt.zero_grad()
        return loss.detach()
    said = run_loop(runs_dir / "scaled", model, opt, step, scaler=scaler)
    assert set(said) == {hygiene.GRAD_SCALE_WRONG}
    assert "still scaled" in said[hygiene.GRAD_SCALE_WRONG] and "2**+16" in said[hygiene.GRAD_SCALE_WRONG]


def test_a_float16_loss_is_named_and_a_float32_one_is_not(runs_dir):
    def loop(name, upcast):
        model = norm_model(torch.float16)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(_i):
            out = model(torch.randn(8, 16, dtype=torch.float16))
            target = torch.zeros_like(out)
            loss = F.mse_loss(out.float(), target.float()) if upcast else F.mse_loss(out, target)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()
        return run_loop(runs_dir / name, model, opt, step)

    assert set(loop("half", False)) == {hygiene.LOSS_FLOAT16}
    assert loop("float", True) == {}


@pytest.mark.parametrize("policy, said", [("float32", True), ("bfloat16", False)])
def test_an_fsdp2_policy_that_computes_in_float32_while_the_preset_says_bfloat16(tmp_path, runs_dir, policy, said):
    """One gloo rank in this process; the run's config asks bfloat16, the script's own fully_shard
    policy decides what its linears compute in."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = Blocks()
        mp = MixedPrecisionPolicy(param_dtype=getattr(torch, policy), reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

        def step(_i):
            loss = model(torch.randn(4, 8)).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()
        found = run_loop(runs_dir / policy, model, opt, step,
                         config={"amp.autocast": True, "amp.dtype": "bfloat16"})
    finally:
        torch.distributed.destroy_process_group()
    if said:
        assert set(found) == {hygiene.POLICY_IGNORED}
        assert "asked bfloat16, computed in float32 in 2 of 2 linears (blocks.0, blocks.1)" in found[hygiene.POLICY_IGNORED]
    else:
        assert found == {}


def test_sampling_off_hooks_nothing(runs_dir):
    model = norm_model(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    said = run_loop(runs_dir / "off", model, opt, plain_step(model, opt, torch.bfloat16),
                    config={"numerics.hygiene_every": 0})
    assert said == {}
    assert not model[1]._forward_hooks and all(not p._backward_hooks for p in model.parameters())


def test_an_optimizer_rounding_stochastically_loses_no_update(runs_dir):
    """bf16-pure with stochastic rounding (torchao's `bf16_stochastic_round` key) keeps small updates on
    average: unchanged values are not lost ones."""
    model = norm_model(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    opt.param_groups[0]["bf16_stochastic_round"] = True  # what the key says; the update itself is torch's here
    assert run_loop(runs_dir / "sr", model, opt, plain_step(model, opt, torch.bfloat16)) == {}


@async_test
async def test_the_run_screen_shows_the_finding_in_its_warning_bar(runs_dir, monkeypatch):
    monkeypatch.chdir(runs_dir.parent)
    model = norm_model(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    assert hygiene.UPDATES_LOST in run_loop(runs_dir / "pure", model, opt, plain_step(model, opt, torch.bfloat16))
    app = app_for(runs_dir, watch=runs_dir / "pure")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        screen = app.screen
        await until(pilot, lambda: screen.model.run.end is not None and not screen.model.loading)
        await until(pilot, screen.drawn)
        await settled(pilot)
        bar = str(screen.query_one("#warning-bar").render())
        assert "updates lost to bfloat16 rounding" in bar


@pytest.mark.parametrize("rounded", [False, True])
def test_the_trainers_pure_bfloat16_mode_hears_of_lost_updates_but_not_of_its_master_weights(runs_dir, rounded):
    """amp.mode = "pure" (bf16-pure): no float32 master copy is its stated choice (no master_weights_16bit);
    updates rounded away at a small lr are still named, unless its optimizer rounds stochastically."""
    from amptui.core.config import presets
    from amptui.jobs import launch
    from amptui.trainer.loop import Trainer

    overrides = {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
                 "data.batch_size": 4, "data.train_samples": 64, "data.val_samples": 0, "data.num_workers": 0,
                 "log.every": 2, "run.epochs": 1, "log.checkpoint_every": 0, "optim.name": "adamw", "optim.lr": 1e-5,
                 "amp.mode": "pure", "amp.dtype": "bfloat16", "amp.stochastic_round": rounded,
                 "numerics.hygiene_every": 1}
    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), overrides, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
    try:
        for _ in range(6):
            trainer.train_step(batches)
        trainer.write_step_record()
    finally:
        trainer.finish("completed")
    said = warnings_of(run_dir)
    assert set(said) == (set() if rounded else {hygiene.UPDATES_LOST}), said


class HandRMSNorm(nn.Module):
    """An RMSNorm as written by hand in model code, computing in its input's dtype unless `upcast`."""

    def __init__(self, width: int, eps: float, upcast: bool):
        super().__init__()
        self.weight, self.eps, self.upcast = nn.Parameter(torch.ones(width)), eps, upcast

    def forward(self, x):
        h = x.float() if self.upcast else x
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


@pytest.mark.parametrize("upcast", [False, True])
def test_a_hand_written_norms_eps_that_rounds_to_zero_in_float16_is_named(runs_dir, upcast):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), HandRMSNorm(32, 1e-8, upcast), nn.Linear(32, 1)).half()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    said = run_loop(runs_dir / f"norm{upcast}", model, opt, plain_step(model, opt, torch.float16))
    if upcast:  # the eps is added in float32: it holds
        assert said == {}
    else:
        assert set(said) == {hygiene.EPS_VANISHES}
        assert said[hygiene.EPS_VANISHES].startswith("1 (a normalisation): eps=1e-08 is zero")


@pytest.mark.parametrize("mode", ["scaled-twice", "scaler-bf16"])
def test_a_script_that_scales_its_loss_twice_is_named(runs_dir, mode):
    """Under the script hooks: scaler.scale(scaler.scale(loss)) is named; the same loop scaling once
    (mistakes.py's scaler-bf16 mode: its own odd combination is another warning's) is not."""
    from support.scripthooks import record_script

    _, recs, _ = record_script(runs_dir, "mistakes.py", mode, log_every=2, sets={"numerics.hygiene_every": 1})
    codes = {r.get("code"): r["message"] for r in recs if r["kind"] == "warning"}
    if mode == "scaled-twice":
        assert "scaled twice" in codes[hygiene.GRAD_SCALE_WRONG]
    else:
        assert hygiene.GRAD_SCALE_WRONG not in codes
