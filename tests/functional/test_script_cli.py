"""`amptui run --script SCRIPT [-- ARGS]` and `-m MODULE` as a user types them: which `--set` keys a
script run honours (the rest refused before anything is written), TensorBoard through the
trainer's sink, a config.toml that says what the loop did, the script's own usage error in the
failure, a module that is not there refused, and advice phrased for a loop rather than preset
keys. The scripts (tests/scripts/) never import amptui; the slow tests start the real command."""

from __future__ import annotations

import re
import sys

import pytest
from support.cli import one_clear_line
from support.paths import SCRIPTS

FLOAT32 = SCRIPTS / "float32_args.py"


@pytest.mark.parametrize("setting, named", [
    ("amp.dtype=float16", "torch.autocast"),
    ("amp.grad_scaler=true", "GradScaler"),
    ("model.name=mlp", "builds its own model"),
    ("data.batch_size=8", "loads its own data"),
    ("optim.lr=0.5", "makes its own optimizer"),
    ("run.epochs=3", "argument after --"),
    ("run.device=cpu", "on a device itself"),
    ("log.checkpoint_every=2", "evaluates and checkpoints"),
    ("numerics.trace_nonfinite=true", "amptui's trainer"),
    ("dist.backend=gloo", "init_process_group"),
    ("dist.mode=dp", "wraps its own model"),
    ("debug.fail_at_step=3", "fault injection"),
])
def test_a_key_the_script_would_ignore_is_refused_with_nothing_written(cli, runs_dir, setting, named):
    key = setting.partition("=")[0]
    for how in (["--script", str(FLOAT32)], ["-m", "json.tool"]):
        line = one_clear_line(cli("run", *how, "--set", "log.every=2", "--set", setting))
        assert f"--set {key}" in line and "not for a script run" in line and named in line, line
        assert ("ddp or fsdp" if key == "dist.mode" else "log.every") in line, "what a script run takes is named"
    assert not runs_dir.exists(), "nothing on disk"


def test_a_module_or_file_that_is_not_there_is_refused_before_the_run_folder(cli, runs_dir, isolated):
    line = one_clear_line(cli("run", "-m", "no.such.mod"))
    assert "-m no.such.mod: no module named 'no'" in line and str(isolated) in line
    package = isolated / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported while checking')\n")  # never run by the check
    (package / "train.py").write_text("print('trained')\n")
    assert "no module named 'mypkg.nothing'" in one_clear_line(cli("run", "-m", "mypkg.nothing"))
    assert "without a __main__.py" in one_clear_line(cli("run", "-m", "mypkg"))
    assert "no such file" in one_clear_line(cli("run", "--script", "missing.py"))
    assert not runs_dir.exists(), "nothing on disk"
    from amptui.jobs.modulefind import module_missing

    assert module_missing("mypkg.train") is None and "mypkg" not in sys.modules, "found without importing it"


def test_a_monitor_asked_for_tensorboard_writes_it(runs_dir):
    """`amptui.Monitor(config={"log": {"tensorboard": True}})` (or a run folder saying so) mirrors
    its records into TensorBoard through the same sink as the trainer and the hooks."""
    pytest.importorskip("tensorboard")
    import torch

    import amptui

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with amptui.Monitor("tb", optimizer=opt, model=model, run_dir=runs_dir / "tb-run", log_every=2,
                        config={"log": {"tensorboard": True}}) as mon:
        for _ in range(4):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(loss)
    written = list((runs_dir / "tb-run" / "tensorboard").glob("events.out.tfevents.*"))
    assert written and written[0].stat().st_size > 100


def test_scale_advice_names_preset_keys_for_the_trainer_and_code_for_a_loop():
    from amptui.telemetry.alarms import FIXES, ScaleAlarms

    trainer = ScaleAlarms(growth_interval=8, dtype="float16", bf16_available=True)
    loop = ScaleAlarms(growth_interval=8, dtype="float16", bf16_available=True, own_loop=True)
    for what in FIXES:
        assert re.search(r"(?<![\w.])(amp|optim)\.", trainer.fix(what)), what
        assert not re.search(r"(?<![\w.])(amp|optim)\.|--set", loop.fix(what)), what


def test_print_launch_of_a_script_keeps_the_script_and_its_arguments(cli, runs_dir):
    out = cli("run", "--script", str(FLOAT32), "--set", "dist.mode=ddp", "--set", "dist.nnodes=2", "--print-launch",
              "--", "--steps", "3", check=True).stdout
    lines = out.splitlines()
    node1 = [line for line in lines if line.startswith("amptui run")][1]
    assert node1.endswith(f"--script {FLOAT32} --set dist.mode=ddp --set dist.nnodes=2 --set dist.node_rank=1 "
                          "-- --steps 3"), node1
    assert [line for line in lines if "which runs:" in line][1].endswith(f"amptui.trainer.scriptrun runs/RUN_ID "
                                                                          f"{FLOAT32} --steps 3")
    assert not runs_dir.exists()


@pytest.mark.parametrize("command", [["ab", "quickstart"], ["tune", "quickstart", "--budget", "1"]])
def test_ab_and_tune_refuse_a_script(cli, runs_dir, command):
    """ab and tune vary amptui's trainer's precision; a script's loop decides its own, so every
    variant would run the same loop: one line, exit 2, nothing written."""
    proc = cli(*command, "--set", f"run.script={FLOAT32}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"run.script = '{FLOAT32}': a script's own loop decides its precision" in proc.stderr
    assert not runs_dir.exists() or not any(runs_dir.iterdir())
