"""`amptui run --script` on scripts that never import amptui (tests/scripts/): the hooks record
their steps, loss, GradScaler, precision, epochs and evaluation, and say their AMP mistakes.

The fast tests run the bootstrap (`amptui.trainer.scriptrun.main`) in this process, as the launched
process runs it; the slow ones start the real command (torchrun, `amptui stop`). Also run on the
oldest torch CI covers (.ci/run's OLDEST_TORCH_TESTS): the hooks touch torch's internals."""

from __future__ import annotations

import json
import os

import pytest
import torch
from support.cli import amptui as amptui_cli
from support.cli import started
from support.paths import SCRIPTS
from support.records import events, only_run, wait_for_step
from support.scripthooks import by_kind, record_script_process, warnings_by_code

from amptui.core.run import runs


@pytest.mark.slow
def test_the_scheduler_after_skip_warning_holds_under_pythonwarnings_ignore(runs_dir):
    """amptui watches the scheduler's step and the GradScaler, not torch's Python warning, which
    PYTHONWARNINGS=ignore switches off in the script's process."""
    _, recs, proc = record_script_process(runs_dir, "mistakes.py", "sched-after-skip", log_every=2,
                                          env={"PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Detected call of `lr_scheduler.step()`" not in proc.stderr  # torch's own warning was silenced
    said = warnings_by_code(recs)
    assert "lr_scheduler.step() ran before" in said.get("scheduler_after_skip", ""), said


@pytest.mark.slow
def test_a_ddp_script_under_torchrun_writes_one_file_per_rank(runs_dir):
    proc = amptui_cli("run", "--script", str(SCRIPTS / "ddp_train.py"), "--set", "dist.mode=ddp",
                      "--set", "dist.nproc_per_node=2", "--set", "log.every=4", check=True)
    run_dir = only_run(runs_dir)
    assert proc.stderr.strip().splitlines()[-1] == f"run {run_dir.name}: completed"  # stdout: the script's
    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    for rank, recs in ((0, rank0), (1, rank1)):
        assert {r["rank"] for r in recs} == {rank}
        assert recs[0]["world_size"] == 2 and recs[0]["precision"]["words"] == "autocast bfloat16"
        assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed" and recs[-1]["steps"] == 16
        assert [e["epoch"] for e in by_kind(recs, "epoch")] == [1, 2]
    steps = by_kind(rank0, "step")
    assert steps[-1]["loss"] < steps[0]["loss"]
    listed = json.loads(amptui_cli("runs", "--format", "json", check=True).stdout)
    assert [(r["status"], r["precision"], r["step"], r["world_size"]) for r in listed] == \
        [("completed", "bf16", 16, 2)]


@pytest.mark.slow
def test_amptui_stop_ends_an_unmodified_script_as_stopped(runs_dir):
    proc = amptui_cli("run", "--detach", "--script", str(SCRIPTS / "amp_recipe.py"), "--set", "log.every=2",
                      "--", "--epochs", "100000", "--dtype", "bfloat16", "--no-scaler", check=True)
    run_id = started(proc.stdout)["run_id"]
    run_dir = runs_dir / run_id
    try:
        wait_for_step(run_dir, timeout=90)
        stop = amptui_cli("stop", run_id)
        assert stop.returncode == 0, stop.stdout + stop.stderr
    finally:  # never leave the script we started running
        info = runs.read_launch_info(run_dir)
        if info.get("pid") and runs.process_alive(info):
            os.kill(info["pid"], 9)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "stopped" and end["steps"] > 0
    assert runs.load_run(run_dir).status == "stopped"


@pytest.mark.slow
@pytest.mark.parametrize("applied", ["", "bf16"])
def test_a_script_saves_and_copies_its_hooked_model_and_optimizer(runs_dir, tmp_path, applied):
    """The hooks leave nothing unpicklable on the user's objects (issue 41.1): `torch.save` of a
    whole model, `pickle` and `copy.deepcopy` of a hooked model and optimizer work as without amptui,
    and the saved file loads where amptui is not (no reference to amptui in it)."""
    sets = {"run.apply_amp": applied} if applied else {}
    run_dir, recs, proc = record_script_process(runs_dir, "saves_model.py", str(tmp_path), sets=sets)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "saved" in proc.stdout
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed"
    assert recs[-1]["steps"] == 4  # the copies are not counted: their hooks are inert
    saved = (tmp_path / "model.pt").read_bytes()
    assert b"amptui" not in saved
    model = torch.load(tmp_path / "model.pt", weights_only=False)
    assert not model._forward_pre_hooks and not model._forward_hooks


@pytest.mark.slow
def test_applied_bf16_reaches_a_loss_computed_outside_the_forward(runs_dir):
    """Applied autocast ends where the model's forward does: its outputs leave in float32, so a loss
    built outside it (sigmoid + BCE, as VAEs do) runs as in the fp32 loop (issue 41.2), with losses
    within bfloat16's noise of the fp32 run's."""
    _, fp32, proc = record_script_process(runs_dir, "loss_outside.py", log_every=1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, bf16, proc = record_script_process(runs_dir, "loss_outside.py", log_every=1, sets={"run.apply_amp": "bf16"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert bf16[-1]["status"] == "completed" and by_kind(bf16, "start")[0]["precision"]["dtype"] == "bfloat16"
    a, b = [s["loss"] for s in by_kind(fp32, "step")], [s["loss"] for s in by_kind(bf16, "step")]
    assert len(a) == len(b) == 6
    assert all(abs(x - y) <= 0.05 * abs(x) for x, y in zip(a, b)), (a, b)
