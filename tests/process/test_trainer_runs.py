"""Real trainer processes on the CPU: the presets end to end, the event stream they write,
stop / resume, and the status of a killed run."""

import json
import os
import signal

import pytest
import torch
from support.cli import amptui, started
from support.records import events, events_so_far, only_run, wait_for_step
from support.waits import wait_until

from amptui.core.run import runs

pytestmark = pytest.mark.slow

STEP_FIELDS = {"v", "kind", "t", "rank", "step", "epoch", "loss", "lr", "scale", "skipped", "skipped_total",
               "samples_per_s", "step_time_ms", "mem"}


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


def cpu_auto_precision() -> str:
    """What quickstart's automatic precision is on this CPU, by the rates the launcher measured."""
    from amptui.machine.dtype_speed import slow_dtypes

    return "fp32" if "bfloat16" in slow_dtypes("cpu") else "autocast bfloat16"


def test_quickstart_completes_with_falling_loss_and_every_field(runs_dir):
    # How long it takes is a benchmark's question (benchmarks/trainer_startup.py), not a test's: on a
    # CPU that emulates bfloat16 (quickstart's "auto" dtype here) it takes several times longer.
    proc = amptui("run", "quickstart", check=True)
    run_dir = only_run(runs_dir)
    assert proc.stdout.strip().splitlines()[-1] == f"run {run_dir.name}: completed"
    recs = events(run_dir)
    kinds = [r["kind"] for r in recs]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert {"start", "step", "epoch", "mem", "checkpoint", "end"} <= set(kinds)
    for rec in recs:
        assert rec["v"] == 1 and rec["rank"] == 0 and isinstance(rec["t"], float)
    start = recs[0]
    for key in ("run_id", "preset", "config", "world_size", "device", "torch", "host", "pid"):
        assert key in start, key
    assert start["run_id"] == run_dir.name and start["world_size"] == 1
    assert set(start["device"]) >= {"type", "name", "count"} and start["device"]["type"] == "cpu"
    assert start["precision"]["words"] == cpu_auto_precision()  # as fast as this CPU allows
    steps = by_kind(recs, "step")
    for rec in steps:
        assert STEP_FIELDS <= set(rec), STEP_FIELDS - set(rec)
        assert rec["scale"] is None  # no GradScaler with bfloat16
        assert {"rss", "peak_rss"} <= set(rec["mem"])
    assert [r["step"] for r in steps] == sorted({r["step"] for r in steps})
    assert steps[-1]["step"] == start["total_steps"]
    assert steps[-1]["loss"] < 0.5 * steps[0]["loss"], "the loss falls"
    epochs = by_kind(recs, "epoch")
    assert [e["epoch"] for e in epochs] == list(range(1, start["epochs"] + 1))
    assert {"train_loss", "val_loss", "val_acc", "epoch_time_s"} <= set(epochs[-1])
    assert epochs[-1]["val_acc"] > 0.5
    mem = by_kind(recs, "mem")[0]
    assert {"rss", "peak_rss", "devices"} <= set(mem)
    end = recs[-1]
    assert end["status"] == "completed" and end["steps"] == start["total_steps"]
    assert {"total_time_s", "final_loss", "val_acc", "peak_mem"} <= set(end)
    assert (run_dir / "output.log").read_text().count("epoch ") >= start["epochs"]
    config_toml = (run_dir / "config.toml").read_text()
    assert 'device = "cpu"' in config_toml and 'dtype = "bfloat16"' in config_toml  # resolved


def test_scaler_lab_shows_real_overflows_backoff_and_growth(runs_dir):
    amptui("run", "scaler-lab", "--set", "run.epochs=3", check=True)
    recs = events(only_run(runs_dir))
    scaler = by_kind(recs, "scaler")
    backoffs = [r for r in scaler if r["event"] == "backoff"]
    growths = [r for r in scaler if r["event"] == "growth"]
    assert backoffs and growths
    for b in backoffs:
        assert b["new_scale"] == b["old_scale"] * 0.5 and b["overflow"], b
    for g in growths:
        assert g["new_scale"] == g["old_scale"] * 2.0
    steps = by_kind(recs, "step")
    assert steps[-1]["skipped_total"] == len(backoffs)
    assert sum(r["skipped"] for r in steps) == len(backoffs)
    assert steps[-1]["scale"] == scaler[-1]["new_scale"]
    assert by_kind(recs, "start")[0]["precision"]["words"] == "autocast float16 + GradScaler"
    assert any("float16 autocast on the CPU" in w["message"] for w in by_kind(recs, "warning"))


@pytest.mark.parametrize("sets, precision", [
    (["amp.autocast=false"], "fp32"),
    (["amp.dtype=bfloat16"], "autocast bfloat16"),
    (["amp.dtype=float16", "amp.grad_scaler=true"], "autocast float16 + GradScaler"),
])
def test_mlp_recipe_in_its_three_precisions(runs_dir, sets, precision):
    tiny = ["model.width=64", "data.batch_size=64", "data.train_samples=640", "run.max_steps=12",
            "amp.clip_grad_norm=1.0"]
    args = [a for s in tiny + sets for a in ("--set", s)]
    amptui("run", "mlp-recipe", *args, check=True)
    recs = events(only_run(runs_dir))
    assert recs[0]["precision"]["words"] == precision
    steps = by_kind(recs, "step")
    assert steps[-1]["step"] == 12 and recs[-1]["status"] == "completed"
    assert all("grad_norm" in s for s in steps)  # clipping on: the norm is reported
    assert all(s["loss"] is not None for s in steps)


def wait_for(predicate, timeout=60.0, what="condition"):
    return wait_until(predicate, timeout, what, step=0.2)


def test_detach_stop_resume_continues_steps_and_scale(runs_dir):
    proc = amptui("run", "scaler-lab", "--detach", "--set", "run.epochs=20", check=True)
    run_id = started(proc.stdout)["run_id"]
    run_dir = runs_dir / run_id
    assert run_dir.is_dir()
    assert runs.load_run(run_dir).status == "running"
    wait_for_step(run_dir, 40, timeout=120)
    stop = amptui("stop", run_id, check=True)
    assert "stopped" in stop.stdout
    info = runs.load_run(run_dir)
    assert info.status == "stopped"
    recs = events(run_dir)
    stopped_at = recs[-1]["steps"]
    last_scale = by_kind(recs, "step")[-1]["scale"]
    ckpt = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["progress"]["step"] == stopped_at
    assert ckpt["scaler"]["scale"] == last_scale
    assert by_kind(recs, "checkpoint")[-1]["step"] == stopped_at

    amptui("resume", run_id, check=True)
    recs = events(run_dir)
    starts = by_kind(recs, "start")
    assert len(starts) == 2 and starts[1]["resumed_from"] == stopped_at
    assert starts[1]["scale"] == last_scale  # the GradScaler came back exactly as saved
    steps = [r["step"] for r in by_kind(recs, "step")]
    assert steps == sorted(set(steps)), "step numbers continue; they never restart"
    assert steps[-1] == starts[0]["total_steps"]
    assert runs.load_run(run_dir).status == "completed"
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "completed")]


def test_a_killed_run_is_listed_killed_and_resumes(runs_dir):
    proc = amptui("run", "quickstart", "--detach", "--set", "log.checkpoint_every_steps=8", check=True)
    run_id = started(proc.stdout)["run_id"]
    run_dir = runs_dir / run_id
    wait_for(lambda: any(r["kind"] == "checkpoint" for r in events_so_far(run_dir)), what="a checkpoint")
    pid = json.loads((run_dir / "run.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: runs.load_run(run_dir).status == "killed", what="killed status")
    table = amptui("runs", check=True).stdout
    assert run_id in table and "killed" in table
    amptui("resume", run_id, check=True)
    info = runs.load_run(run_dir)
    assert info.status == "completed" and info.step == info.total_steps


def test_a_failing_run_says_why(runs_dir):
    proc = amptui("run", "quickstart", "--set", "debug.fail_at_step=5", "--set", "log.every=1")
    assert proc.returncode == 1
    assert "injected failure at step 5" in proc.stderr and "Traceback" not in proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["status"] == "failed" and end["error"]["type"] == "RuntimeError"
    assert "Traceback" in end["error"]["traceback"]
    assert runs.load_run(run_dir).status == "failed"
    resumed = amptui("resume", run_dir.name)
    assert resumed.returncode == 2 and "no checkpoint" in resumed.stderr


def test_completed_and_running_runs_cannot_be_resumed_or_stopped_twice(runs_dir):
    amptui("run", "quickstart", "--set", "run.max_steps=4", check=True)
    run_id = only_run(runs_dir).name
    assert "has completed" in amptui("resume", run_id).stderr
    assert "is not running" in amptui("stop", run_id).stderr
