"""`amptui run --script` on scripts that never import amptui (tests/scripts/): the hooks record
their steps, loss, GradScaler, precision, epochs and evaluation, and say their AMP mistakes.

The fast tests run the bootstrap (`amptui.trainer.scriptrun.main`) in this process, as the launched
process runs it; the slow ones start the real command (torchrun, `amptui stop`). Also run on the
oldest torch CI covers (.ci/run's OLDEST_TORCH_TESTS): the hooks touch torch's internals."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from support.machine import count_device_reads
from support.paths import SCRIPTS
from support.records import events, only_run
from support.scripthooks import by_kind, record_script, warnings_by_code
from torch import nn

import amptui
from amptui.core.config.values import read_toml
from amptui.core.run import runs
from amptui.jobs import launch
from amptui.telemetry import scripthooks
from amptui.telemetry.scripthooks.stepclock import StepClock
from amptui.trainer import scriptrun


def falling(steps):
    losses = [s["loss"] for s in steps]
    return losses[-1] < losses[0], losses


def test_amp_recipe_loop_float16_scaler_unscale_and_clip(runs_dir):
    run_dir, recs, error = record_script(runs_dir, "amp_recipe.py", "--init-scale", str(2.0 ** 24), "--lr", "0.3")
    assert error is None
    start, end = recs[0], recs[-1]
    assert start["kind"] == "start" and start["source"] == "script"
    assert start["precision"]["words"] == "autocast float16 + GradScaler"
    assert start["scale"] == 2.0 ** 24
    steps = by_kind(recs, "step")
    assert [s["step"] for s in steps][-1] == 40 and end["status"] == "completed" and end["steps"] == 40
    ok, losses = falling(steps)
    assert ok, losses
    backoffs = [r for r in by_kind(recs, "scaler") if r["event"] == "backoff"]
    assert backoffs and backoffs[0]["step"] == 1 and backoffs[0]["old_scale"] == 2.0 ** 24
    assert "0.weight" in backoffs[0]["overflow"]
    assert steps[-1]["skipped_total"] == len(backoffs) == sum(s["skipped"] for s in steps)
    assert all(s["lr"] == 0.3 and s["samples_per_s"] > 0 for s in steps)
    assert any(s.get("grad_norm") for s in steps)  # clip_grad_norm_'s return value
    assert "clip_scaled" not in warnings_by_code(recs)  # unscale_ came first: no warning
    info = runs.load_run(run_dir)
    assert (info.status, info.precision, info.step) == ("completed", "fp16+scaler", 40)
    config = (run_dir / "config.toml").read_text()
    assert "[model]" not in config and "[data]" not in config and "smallcnn" not in config
    assert 'dtype = "float16"' in config and "grad_scaler = true" in config and "growth_interval = 5" in config
    # Every patch came out again with the script's end.
    assert torch.amp.GradScaler.scale.__module__ == "torch.amp.grad_scaler"
    assert torch.autograd.backward.__module__ == "torch.autograd"
    assert torch.nn.utils.clip_grad_norm_.__module__.startswith("torch.nn.utils")


def test_clipping_scaled_gradients_is_said_once_with_the_fix(runs_dir):
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--no-unscale", "--steps", "6", "--epochs", "1")
    assert error is None
    said = [r for r in by_kind(recs, "warning") if r.get("code") == "clip_scaled"]
    assert len(said) == 1 and "scaler.unscale_(optimizer)" in said[0]["message"]
    assert recs[-1]["status"] == "completed"


@pytest.mark.parametrize("evaluate_on", ["val", "train"])
def test_bfloat16_accumulation_loader_scheduler_and_evaluation(runs_dir, evaluate_on):
    """192 samples / 16 per batch = 12 micro-batches, 2 per step: 6 steps an epoch, 3 epochs.
    Evaluating on a separate loader, or on the training DataLoader itself (the same object iterated
    again under no_grad, after a peek at one batch with next(iter(loader))): the same 3 epochs,
    each with its evaluation's time."""
    args = ("2", "--eval-on-train") if evaluate_on == "train" else ("2",)
    run_dir, recs, error = record_script(runs_dir, "loader_eval.py", *args, log_every=3)
    assert error is None
    assert recs[0]["precision"]["words"] == "autocast bfloat16"
    steps, epochs = by_kind(recs, "step"), by_kind(recs, "epoch")
    assert recs[-1]["steps"] == 18 and steps[-1]["step"] == 18
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert [s["epoch"] for s in steps] == [1, 1, 2, 2, 3, 3]
    assert epochs[0]["train_loss"] > epochs[-1]["train_loss"]
    # 4 classes: the loss starts near ln 4 = 1.39; the script backwards loss / 2 per micro-batch,
    # and the step's loss is their sum (the true loss), not their mean (half of it)
    assert 1.1 < steps[0]["loss"] < 1.6, steps[0]["loss"]
    assert all(e["eval_time_s"] > 0 for e in epochs)
    assert sorted({s["lr"] for s in steps}, reverse=True) == [0.02, 0.01, 0.005]  # StepLR, per epoch
    assert all(s["data_wait_ms"] is not None and s["samples_per_s"] > 0 for s in steps)
    assert all(s["scale"] is None for s in steps) and not by_kind(recs, "scaler")
    assert runs.load_run(run_dir).precision == "bf16"


def test_a_record_written_after_the_epochs_scheduler_step_keeps_its_steps_lr(runs_dir):
    """A record every 4 steps, 6 steps an epoch: the epoch's last steps are written when the next
    pass begins (or the script ends), after the script's per-epoch StepLR stepped. Their lr is
    the one those steps ran with, not the next epoch's (as the trainer writes them)."""
    _, recs, error = record_script(runs_dir, "loader_eval.py", "2", log_every=4)
    assert error is None
    steps = by_kind(recs, "step")
    assert [(s["step"], s["epoch"]) for s in steps] == [(4, 1), (6, 1), (8, 2), (12, 2), (16, 3), (18, 3)]
    assert [s["lr"] for s in steps] == [0.02, 0.02, 0.01, 0.01, 0.005, 0.005]


def test_two_models_two_optimizers_one_scaler(runs_dir):
    _, recs, error = record_script(runs_dir, "gan.py", log_every=4)
    assert error is None
    assert recs[0]["precision"]["words"] == "autocast float16 + GradScaler"
    steps = by_kind(recs, "step")
    assert recs[-1]["steps"] == 24 and steps[-1]["step"] == 24  # one step per iteration, not per optimizer
    backoffs = [r for r in by_kind(recs, "scaler") if r["event"] == "backoff"]
    # each model named by the script's own variable for it (model0 = Encoder(), model1 = Decoder())
    assert backoffs and {"model0.fc.weight", "model1.fc.weight"} <= set(backoffs[0]["overflow"])
    ok, losses = falling(steps)
    assert ok, losses


@pytest.mark.parametrize("alias", [False, True])
def test_overflowing_names_say_the_scripts_own_variables_for_two_models(runs_dir, alias):
    """Two nn.Sequential made as locals of the script's main(), stepped through a helper whose
    argument is called `model`: the overflowing parameters are named `netG.0.weight` and
    `netD.0.weight` (main's variables), not by class and index. A model held by two variables
    (`critic = netD`) keeps the class-and-index name, as a model held by none does."""
    _, recs, error = record_script(runs_dir, "gan_in_main.py", *(["--alias"] if alias else []), log_every=2)
    assert error is None
    named = set().union(*(r["overflow"] for r in by_kind(recs, "scaler") if r["event"] == "backoff"))
    generator = {"netG.0.weight", "netG.2.weight"} & named
    assert generator, named
    discriminator = {"Sequential1.0.weight", "Sequential1.2.weight"} if alias else {"netD.0.weight", "netD.2.weight"}
    assert discriminator & named, named
    assert all(n.split(".")[0] in ("netG", "Sequential1" if alias else "netD") for n in named), named


@pytest.mark.parametrize("args, precision", [
    (("--n-critic", "5"), "fp32"),
    (("--n-critic", "5", "--shape", "every-nth", "--dtype", "bfloat16"), "autocast bfloat16"),
    (("--n-critic", "1"), "fp32"),
    (("--n-critic", "5", "--dtype", "float16"), "autocast float16 + GradScaler"),
])
def test_a_wgan_loop_counts_generator_steps_with_the_generator_loss(runs_dir, tmp_path, args, precision):
    """The critic steps n_critic times per generator step (1: a plain GAN, D then G; with a
    GradScaler, update() after every optimizer step): one training step per generator step, its
    loss the generator's as the script itself logs it, its lr the generator optimizer's -- not one
    step per optimizer step with critic and generator losses averaged."""
    losses_file = tmp_path / "losses.json"
    _, recs, error = record_script(runs_dir, "wgan.py", "--iters", "4", *args, "--losses", str(losses_file),
                                   log_every=2)
    assert error is None
    generator = json.loads(losses_file.read_text())
    steps = by_kind(recs, "step")
    assert recs[-1]["steps"] == len(generator) == 4 and [s["step"] for s in steps] == [2, 4]
    expected = [(generator[0] + generator[1]) / 2, (generator[2] + generator[3]) / 2]
    assert [s["loss"] for s in steps] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert all(s["lr"] == 5e-4 for s in steps)
    assert recs[0]["precision"]["words"] == precision


def test_an_optimizer_made_anew_each_epoch_keeps_the_count(runs_dir):
    """Old-style lr decay: a new optimizer over the same parameters every epoch replaces the old
    one (no step waits for an optimizer that will never step again); the lr is the new one's."""
    run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": 2}, runs_dir)
    session = scripthooks.install(run_dir)
    try:
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        for epoch in range(3):
            opt = torch.optim.SGD(model.parameters(), lr=0.1 / 2 ** epoch)
            for _ in range(4):
                model(torch.randn(8, 4)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    finally:
        session.end("completed")
    recs = events(run_dir)
    assert recs[-1]["steps"] == 12
    assert [s["lr"] for s in by_kind(recs, "step")] == [0.1, 0.1, 0.05, 0.05, 0.025, 0.025]


def test_an_optimizer_made_and_never_stepped_stalls_no_count():
    """The step clock waits for every optimizer in use, but not forever: one made and never
    stepped stops being waited for after `retire_after` optimizer steps."""
    used, unused = nn.Linear(2, 2), nn.Linear(2, 2)
    clock = StepClock(retire_after=3)
    opt, idle = torch.optim.SGD(used.parameters(), lr=0.1), torch.optim.SGD(unused.parameters(), lr=0.1)
    clock.made(opt)
    clock.made(idle)
    ended = []
    for _ in range(6):
        clock.stepped(opt)
        ended.append(clock.complete())
        if ended[-1]:
            clock.boundary()
    assert ended == [False, False, False, True, True, True]


def test_a_float16_script_that_overflows_gets_range_samples_naming_the_layer(runs_dir):
    """`--set numerics.every=1` on an unmodified float16 + GradScaler loop whose layer 2 overflows
    every step: the hooks sample its model from the second step on (the first step names the model)
    in the float16 its autocast entered, and each backoff names the first non-finite module."""
    run_dir, recs, error = record_script(runs_dir, "amp_recipe.py", "--blow-up", "2", "--steps", "4", "--epochs", "1",
                                         log_every=2, sets={"numerics.every": 1})
    assert error is None and recs[-1]["status"] == "completed"
    samples = by_kind(recs, "numerics")
    assert [r["step"] for r in samples] == [2, 3, 4]
    assert [layer["name"] for layer in samples[0]["layers"]] == ["0", "1", "2", "3", "4"]
    assert samples[0]["dtype"] == "float16" and samples[0]["max_finite"] == 65504.0
    assert all(layer["forward"] is not None and layer["forward"] > 0 for layer in samples[0]["layers"][:2])
    first = samples[0]["first_nonfinite"]
    assert (first["module"], first["where"]) == ("2", "forward"), first
    backoffs = {r["step"]: r for r in by_kind(recs, "scaler") if r["event"] == "backoff"}
    assert set(backoffs) == {1, 2, 3, 4} and "first_nonfinite" not in backoffs[1]  # step 1: not sampled
    assert all(backoffs[step]["first_nonfinite"]["module"] == "2" for step in (2, 3, 4))
    assert any("first non-finite: 2 (forward" in m for m in warnings_by_code(recs).values())
    assert "[numerics]" in (run_dir / "config.toml").read_text()


def test_without_numerics_a_script_gets_no_samples_and_no_numerics_section(runs_dir):
    run_dir, recs, error = record_script(runs_dir, "amp_recipe.py", "--blow-up", "2", "--steps", "3", "--epochs", "1",
                                         log_every=3)
    assert error is None and not by_kind(recs, "numerics")
    assert "[numerics]" not in (run_dir / "config.toml").read_text()


def test_an_fsdp2_script_is_recorded_with_its_policy_named(runs_dir, tmp_path):
    """A script that shards its own model with fully_shard and a bfloat16 MixedPrecisionPolicy (one
    gloo process, an explicit CPU mesh): no autocast, yet the run lists the policy, and dist.mode fsdp."""
    run_dir, recs, error = record_script(runs_dir, "fsdp_train.py", "--store", str(tmp_path / "store"), log_every=3)
    assert error is None
    start, end = recs[0], recs[-1]
    assert start["precision"]["words"] == "FSDP bfloat16 params, float32 reduce"
    assert start["precision"]["fsdp"] == {"param_dtype": "bfloat16", "reduce_dtype": "float32",
                                          "sharded_dtype": "float32"}
    assert start["config"]["dist"]["mode"] == "fsdp" and start["config"]["amp"]["reduce_dtype"] == "float32"
    assert (end["status"], end["steps"]) == ("completed", 6)
    info = runs.load_run(run_dir)
    assert (info.status, info.precision) == ("completed", "bf16")
    assert 'mode = "fsdp"' in (run_dir / "config.toml").read_text()


def test_a_script_that_raises_ends_failed_with_its_error(runs_dir):
    run_dir, recs, error = record_script(runs_dir, "amp_recipe.py", "--fail-at", "7", "--dtype", "bfloat16",
                                         "--no-scaler")
    assert isinstance(error, RuntimeError)
    end = recs[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and end["steps"] == 7
    assert end["error"]["type"] == "RuntimeError" and "the data went away at step 7" in end["error"]["message"]
    assert recs[0]["precision"]["words"] == "autocast bfloat16"
    info = runs.load_run(run_dir)
    assert info.status == "failed" and "the data went away" in info.error


@pytest.mark.parametrize("mode, code, fails", [
    ("no-update", "step_without_update", True),
    ("half-params", "fp16_params", True),
    ("scaler-bf16", "scaler_bfloat16", False),
    ("sched-after-skip", "scheduler_after_skip", False),
    ("sched-after-skip-quiet", "scheduler_after_skip", False),  # warnings.filterwarnings("ignore") in the script
    ("fp16-no-scaler", "fp16_underflow", False),
])
def test_amp_mistakes_are_said_live(runs_dir, mode, code, fails):
    _, recs, error = record_script(runs_dir, "mistakes.py", mode, log_every=2)
    said = warnings_by_code(recs)
    assert code in said, (said, error)
    assert len([r for r in by_kind(recs, "warning") if r.get("code") == code]) == 1
    assert (recs[-1]["status"] == "failed") == fails and (error is not None) == fails
    if fails:  # the scaler.step() that raised is not counted: no-update's first step ran, half-params' none
        assert recs[-1]["steps"] == {"no-update": 1, "half-params": 0}[mode], recs[-1]


def test_a_scheduler_stepped_after_a_trained_step_is_not_warned_about(runs_dir):
    _, recs, error = record_script(runs_dir, "mistakes.py", "scaler-bf16", log_every=2)
    assert error is None and "scheduler_after_skip" not in warnings_by_code(recs)


def test_a_script_with_its_own_monitor_is_recorded_once(runs_dir, isolated, monkeypatch):
    script = isolated / "with_monitor.py"
    script.write_text("import torch, amptui\n"
                      "model = torch.nn.Linear(4, 1); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "scaler = torch.amp.GradScaler('cpu', init_scale=256.0)\n"
                      "with amptui.Monitor('mine', scaler=scaler, optimizer=opt, model=model, log_every=2) as mon:\n"
                      "    for _ in range(4):\n"
                      "        with torch.autocast('cpu', dtype=torch.float16):\n"
                      "            loss = model(torch.randn(8, 4)).pow(2).mean()\n"
                      "        scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); opt.zero_grad()\n"
                      "        mon.step(loss, batch_size=8)\n")
    run_dir, _ = launch.create_run(None, {"run.script": str(script)}, runs_dir)
    monkeypatch.setenv("AMPTUI_RUN_DIR", str(run_dir))  # as the launcher sets it
    saved = sys.argv[:], sys.path[:]
    try:
        scriptrun.main([str(run_dir), str(script)], install_hooks=scripthooks.install)
    finally:
        sys.argv[:], sys.path[:] = saved
    recs = events(run_dir)
    assert len(by_kind(recs, "start")) == 1 and len(by_kind(recs, "end")) == 1
    assert recs[0]["source"] == "monitor" and recs[0]["precision"]["words"] == "autocast float16 + GradScaler"
    assert runs.load_run(run_dir).precision == "fp16+scaler"  # not the machine's default, bf16


def test_monitor_without_config_names_the_precision_the_loop_used(runs_dir):
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with amptui.Monitor("plain", optimizer=opt, model=model, log_every=2) as mon:
        for _ in range(2):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            mon.step(loss)
    run_dir = only_run(runs_dir)
    assert events(run_dir)[0]["precision"]["words"] == "fp32"
    assert runs.load_run(run_dir).precision == "fp32"
    assert "smallcnn" not in (run_dir / "config.toml").read_text()  # no model the loop never used


def _recipe_steps(device: str, fused: bool = False):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True) if fused else \
        torch.optim.SGD(net.parameters(), lr=1e-3)
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
    x, y = torch.randn(16, 32, device=device), torch.randn(16, 32, device=device)

    def steps(n: int, after=None):
        for _ in range(n):
            with torch.autocast(device_type=device, dtype=dtype):
                loss = nn.functional.mse_loss(net(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            if after is not None:
                after()
    return steps


def test_the_hooks_read_the_device_once_per_record_only(runs_dir, monkeypatch):
    """As test_monitor's sync count: every Python-level device-to-host read is counted (CUDA's
    sync-debug mode needs a GPU: the `gpu` test below). Bare loop and hooked loop, same steps:
    the hooks add exactly the step record's one read every log.every steps."""
    counts = count_device_reads(monkeypatch)
    per_step: list[int] = []
    _recipe_steps("cpu")(20, after=lambda: per_step.append(counts["n"]))
    bare = per_step[:]
    counts["n"], per_step[:] = 0, []


    run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": 10}, runs_dir)
    session = scripthooks.install(run_dir)
    try:
        _recipe_steps("cpu")(20, after=lambda: per_step.append(counts["n"]))
    finally:
        session.end("completed")
    extra = [h - b for b, h in zip(bare, per_step, strict=True)]
    assert extra == [i // 10 for i in range(1, 21)], extra
    assert [s["step"] for s in by_kind(events(run_dir), "step")] == [10, 20]


@pytest.mark.gpu
def test_no_host_device_sync_added_on_cuda(runs_dir):
    """torch.cuda.set_sync_debug_mode("error"): a fused optimizer's GradScaler step needs no sync,
    so any sync inside the window's steps would be the hooks' (records come every 1000 steps)."""


    run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": 1000}, runs_dir)
    session = scripthooks.install(run_dir)
    steps = _recipe_steps("cuda", fused=True)
    try:
        steps(3)  # the first step writes the start record
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            steps(10)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    finally:
        session.end("completed")
    recs = events(run_dir)
    assert recs[0]["precision"]["words"] == "autocast float16 + GradScaler" and recs[-1]["steps"] == 13


def test_a_module_run_as_a_script(runs_dir, isolated, cli):
    package = isolated / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(
        "import sys, torch\n"
        "model = torch.nn.Linear(4, 1); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    loss = model(torch.randn(8, 4)).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()\n")
    run_dir, cfg = launch.create_run(None, {"run.script": "-m mypkg.train", "log.every": 2}, runs_dir)
    assert cfg.run.name == "train"
    saved = sys.argv[:], sys.path[:]
    try:
        scriptrun.main([str(run_dir), "-m mypkg.train", "4"], install_hooks=scripthooks.install)
    finally:
        sys.argv[:], sys.path[:] = saved
        for name in ("mypkg", "mypkg.train"):
            sys.modules.pop(name, None)
    recs = events(run_dir)
    assert recs[-1]["status"] == "completed" and recs[-1]["steps"] == 4
    assert recs[0]["precision"]["words"] == "fp32" and recs[0]["preset"] == "train"
    refused = cli("run", "-m", "not a module")
    assert refused.returncode == 2 and "is not a module name" in refused.stderr


def test_a_run_folder_amptui_did_not_make(runs_dir):
    """`torchrun ... -m amptui.trainer.scriptrun RUN_DIR train.py` (the script's own launch): the
    bootstrap makes the folder a run, which `amptui runs` lists."""
    run_dir = runs_dir / "20260101-000000-mine-0001"
    saved = sys.argv[:], sys.path[:]
    try:
        scriptrun.main([str(run_dir), str(SCRIPTS / "loader_eval.py"), "1"], install_hooks=scripthooks.install)
    finally:
        sys.argv[:], sys.path[:] = saved
    recs = events(run_dir)
    assert recs[0]["preset"] == "loader_eval" and recs[-1]["status"] == "completed" and recs[-1]["steps"] == 36
    info = runs.load_run(run_dir)
    assert (info.status, info.precision, info.step) == ("completed", "bf16", 36)


def test_a_script_given_by_a_relative_path_is_stored_absolute_and_listed_by_its_file_name(runs_dir, isolated,
                                                                                           monkeypatch):
    """`amptui run --script recipe.py` (relative, as typed): config.toml names the file by its
    absolute path, as the script's own torchrun launch stores it (above), so the run still names
    its file from another folder (the launch runs it from there too); the run list's preset
    column and the start line keep the short name."""
    (isolated / "recipe.py").write_text((SCRIPTS / "amp_recipe.py").read_text())
    run_dir, cfg = launch.create_run(None, {"run.script": "recipe.py", "log.every": 2}, runs_dir)
    stored = str(isolated / "recipe.py")
    assert cfg.run.script == stored and cfg.run.name == "recipe"
    assert launch.trainer_command(cfg, run_dir)[-1] == stored
    elsewhere = isolated / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    saved = sys.argv[:], sys.path[:]
    try:
        scriptrun.main([str(run_dir), cfg.run.script, "--steps", "2", "--epochs", "1"], install_hooks=scripthooks.install)
    finally:
        sys.argv[:], sys.path[:] = saved
    recs = events(run_dir)
    assert recs[-1]["status"] == "completed" and recs[-1]["steps"] == 2
    assert recs[0]["preset"] == "recipe" and recs[0]["config"]["run"]["script"] == stored
    assert read_toml(run_dir / "config.toml")["run"]["script"] == stored  # the hooks' rewrite keeps it
    assert runs.load_run(run_dir).preset == "recipe"


def test_a_failing_end_of_the_hooks_never_breaks_the_script(runs_dir, tmp_path, capsys):
    """The hooks' last records failing (a full disk) must not turn a clean script into a crash:
    one line on stderr, the script's own ending, and the run still gets its end record."""
    class BrokenEnd:
        stop_sent = False

        def end(self, status, error=None):
            raise OSError("No space left on device")

    script = tmp_path / "quiet.py"
    script.write_text("print('trained')\n")
    run_dir, _ = launch.create_run(None, {"run.script": str(script)}, runs_dir)
    saved = sys.argv[:], sys.path[:]
    try:
        scriptrun.main([str(run_dir), str(script)], install_hooks=lambda _run_dir: BrokenEnd())
    finally:
        sys.argv[:], sys.path[:] = saved
    assert "[amptui] recording stopped: OSError: No space left on device" in capsys.readouterr().err
    assert by_kind(events(run_dir), "end")[-1]["status"] == "completed"
