"""`amptui run --script SCRIPT [-- ARGS]` and `-m MODULE` as a user types them: which `--set` keys a
script run honours (the rest refused before anything is written), TensorBoard through the
trainer's sink, a config.toml that says what the loop did, the script's own usage error in the
failure, a module that is not there refused, and advice phrased for a loop rather than preset
keys. The scripts (tests/scripts/) never import amptui; the slow tests start the real command."""

from __future__ import annotations

import json
import re

import pytest
from support.cli import amptui
from support.paths import SCRIPTS
from support.records import events, only_run

from amptui.core.config.values import read_toml
from amptui.core.run import runs

FLOAT32 = SCRIPTS / "float32_args.py"


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


@pytest.mark.slow
def test_a_float32_script_with_tensorboard_log_every_and_a_name(runs_dir):
    """One run: the keys a script takes are honoured (run.name, log.every, log.tensorboard), the
    TensorBoard scalars read back equal the step records, and config.toml says float32 (no
    autocast dtype, no GradScaler settings the loop never used)."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = amptui("run", "--script", str(FLOAT32), "--set", "log.tensorboard=true", "--set", "log.every=2",
                  "--set", "run.name=tiny", "--", "--steps", "6", check=True)
    run_dir = only_run(runs_dir)
    # in a pipe amptui's lines are on stderr, stdout is the script's (issue 34)
    assert run_dir.name.split("-")[2] == "tiny" and proc.stderr.strip().endswith(f"run {run_dir.name}: completed")
    assert proc.stdout.startswith("trained 6 steps"), proc.stdout
    recs = events(run_dir)
    steps = by_kind(recs, "step")
    assert [s["step"] for s in steps] == [2, 4, 6] and recs[0]["preset"] == "tiny"
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    assert {"train/loss", "train/lr", "memory/rss_mib"} <= set(acc.Tags()["scalars"])
    assert [(e.step, round(e.value, 5)) for e in acc.Scalars("train/loss")] == \
        [(s["step"], round(s["loss"], 5)) for s in steps]
    config = read_toml(run_dir / "config.toml")
    assert config["amp"] == {"autocast": False, "grad_scaler": False}, config["amp"]
    assert config["log"] == {"every": 2, "tensorboard": True} and config["run"]["name"] == "tiny"
    assert "model" not in config and "data" not in config
    info = runs.load_run(run_dir)
    assert (info.precision, info.status, info.step) == ("fp32", "completed", 6)
    assert recs[0]["precision"]["words"] == "fp32" and recs[0]["config"]["amp"] == config["amp"]


@pytest.mark.slow
def test_a_bad_script_argument_fails_with_the_scripts_own_words(runs_dir, isolated):
    """Given by a relative path, as typed in the script's folder: config.toml names the file by its
    absolute path, the run list by its name."""
    (isolated / FLOAT32.name).write_text(FLOAT32.read_text())
    proc = amptui("run", "--script", FLOAT32.name, "--", "--bogus")
    said = "float32_args.py: error: unrecognized arguments: --bogus"
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # the script's own exit code (issue 32)
    assert f"SystemExit: exit code 2: {said}" in proc.stderr, proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and end["error"]["message"] == f"exit code 2: {said}"
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert listed[0]["error"] == f"SystemExit: exit code 2: {said}" and listed[0]["preset"] == "float32_args"
    assert read_toml(run_dir / "config.toml")["run"]["script"] == str(isolated / FLOAT32.name)


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_a_script_that_removes_its_own_run_folder_ends_with_its_own_exit_code_and_one_line(runs_dir, isolated, code):
    (isolated / "vanish.py").write_text("import os, shutil, sys\n"
                                        "shutil.rmtree(os.environ['AMPTUI_RUN_DIR'])\n"
                                        f"sys.exit({code})\n")
    proc = amptui("run", "--script", "vanish.py")
    said = proc.stdout + proc.stderr
    assert proc.returncode == code and "Traceback" not in said, said
    told = [line for line in said.splitlines() if "vanished" in line]
    assert len(told) == 1 and "run folder" in told[0] and str(runs_dir) in told[0], said
    assert not any(runs_dir.iterdir()), "nothing written back into the runs folder"


@pytest.mark.slow
def test_a_float16_script_gets_advice_for_its_loop_and_a_config_naming_its_scaler(runs_dir):
    """The AMP recipe with a layer whose float16 output overflows at every scale: the backoff
    streak's advice says what to change in the loop, not a preset key the script lacks."""
    proc = amptui("run", "--script", str(SCRIPTS / "amp_recipe.py"), "--set", "log.every=5",
                  "--", "--init-scale", str(2.0 ** 20), "--blow-up", "2", "--steps", "24", "--epochs", "1", check=True)
    run_dir = only_run(runs_dir)
    warnings = {r["code"]: r["message"] for r in by_kind(events(run_dir), "warning")}
    streak = warnings["backoff_streak"]
    assert "calibration from init_scale 2^20 is allowed 20 backoffs" in streak, streak
    # the first non-finite record's replay names the layer (issue 51.5), so the advice is the forward's, not the lr's
    assert "module 2 (forward, float16 max exceeded" in warnings["nonfinite_cause"], warnings
    assert "autocast to torch.bfloat16 in your loop" in streak, streak
    assert "keep 2 out of float16" in warnings["nonfinite_cause"], warnings
    assert not [m for m in warnings.values() if re.search(r"(?<![\w.])(amp|optim)\.|--set", m)], warnings
    assert "autocast to torch.bfloat16 in your loop" in proc.stdout + proc.stderr, "said on the terminal too"
    amp = read_toml(run_dir / "config.toml")["amp"]
    assert amp["autocast"] is True and amp["dtype"] == "float16" and amp["grad_scaler"] is True
    assert amp["init_scale"] == 2.0 ** 20 and amp["growth_interval"] == 5
