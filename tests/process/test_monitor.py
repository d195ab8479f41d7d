"""amptui.Monitor: an existing training loop writes amptui's event stream -- in-process, as the
example script under plain `python`, and launched by `amptui run --script`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import amptui as amptui_cli
from support.cli import started
from support.paths import REPO
from support.records import events, only_run, wait_for_step

from amptui.core.run import runs

EXAMPLE = REPO / "examples" / "amp_recipe_monitor.py"
# float16 + GradScaler with a huge initial scale on a 64-wide model: real overflows, backoffs and
# growth within seconds on a CPU (float16 matmuls are slow on CPUs; keep them tiny).
SCALER_ARGS = ["--dtype", "float16", "--size", "64", "--batch-size", "32", "--num-batches", "10",
               "--init-scale", str(2.0 ** 32), "--growth-interval", "5", "--log-every", "5"]


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


@pytest.mark.slow
def test_import_amptui_stays_free_of_torch():
    code = "import sys, amptui; assert 'torch' not in sys.modules; amptui.Monitor; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.slow
def test_a_script_that_never_closes_still_gets_its_end_record(runs_dir, isolated):
    script = isolated / "forgetful.py"
    script.write_text("import torch, amptui\n"
                      "mon = amptui.Monitor('forgetful', model=torch.nn.Linear(2, 2))\n"
                      "mon.step(torch.tensor(2.0))\n"
                      "raise RuntimeError('lost the data loader')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "lost the data loader" in proc.stderr
    end = events(only_run(runs_dir))[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and end["steps"] == 1
    assert end["error"]["message"] == "lost the data loader"


def _example_run_checks(run_dir: Path, expect_preset: str):
    recs = events(run_dir)
    steps = by_kind(recs, "step")
    assert steps and all(s["loss"] is not None and s["lr"] == 1e-3 and s["scale"] for s in steps)
    backoffs = [r for r in by_kind(recs, "scaler") if r["event"] == "backoff"]
    assert backoffs and steps[-1]["skipped_total"] == len(backoffs) == sum(s["skipped"] for s in steps)
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed"
    assert recs[0]["preset"] == expect_preset


@pytest.mark.slow
def test_example_under_plain_python_shows_in_amptui_runs(runs_dir):
    subprocess.run([sys.executable, str(EXAMPLE), *SCALER_ARGS, "--steps", "20"], check=True, timeout=120,
                   capture_output=True, text=True)
    run_dir = only_run(runs_dir)
    _example_run_checks(run_dir, "amp-recipe")
    listed = json.loads(amptui_cli("runs", "--format", "json", check=True).stdout)
    assert [(r["run_id"], r["status"], r["precision"], r["step"]) for r in listed] == \
        [(run_dir.name, "completed", "fp16+scaler", 20)]
    assert listed[0]["final_loss"] is not None


@pytest.mark.slow
def test_example_under_amptui_run_script_and_torchrun(runs_dir):
    """`amptui run --script` with dist.mode=ddp: torchrun starts the script twice; rank 0 writes
    events.jsonl, rank 1 events.rank1.jsonl, in the folder amptui made."""
    proc = amptui_cli("run", "--script", str(EXAMPLE), "--set", "dist.mode=ddp", "--set", "dist.nproc_per_node=2",
                      "--", *SCALER_ARGS, "--steps", "30", check=True)
    run_dir = only_run(runs_dir)
    assert proc.stderr.strip().splitlines()[-1] == f"run {run_dir.name}: completed"  # stdout: the script's
    assert "skipped" in proc.stderr
    _example_run_checks(run_dir, "amp-recipe")
    assert "30 steps; final loss" in (run_dir / "output.log").read_text()
    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    assert {r["rank"] for r in rank0} == {0} and {r["rank"] for r in rank1} == {1}
    assert rank0[0]["world_size"] == 2 and rank1[0]["world_size"] == 2
    assert rank1[-1]["kind"] == "end" and rank1[-1]["status"] == "completed"
    listed = json.loads(amptui_cli("runs", "--format", "json", check=True).stdout)
    assert [(r["run_id"], r["status"], r["precision"], r["step"], r["total_steps"], r["world_size"])
            for r in listed] == [(run_dir.name, "completed", "fp16+scaler", 30, 30, 2)]


@pytest.mark.slow
def test_amptui_stop_ends_a_script_run_as_stopped(runs_dir):
    proc = amptui_cli("run", "--detach", "--script", str(EXAMPLE), "--", "--epochs", "100000", check=True)
    run_id = started(proc.stdout)["run_id"]
    run_dir = runs_dir / run_id
    try:
        wait_for_step(run_dir)
        stop = amptui_cli("stop", run_id)
        assert stop.returncode == 0, stop.stdout + stop.stderr
    finally:  # never leave the script we started running
        pid = runs.read_launch_info(run_dir).get("pid")
        if pid and runs.process_alive(runs.read_launch_info(run_dir)):
            os.kill(pid, 9)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "stopped"
    assert runs.load_run(run_dir).status == "stopped"
