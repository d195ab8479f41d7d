"""DDP through real torchrun processes on gloo (CPU): one node, two nodes on loopback, stop and
resume, and a failing rank that explains itself."""

import json
import socket
import subprocess
import sys
import time

import pytest

from amptui.core import runs
from conftest import amptui, events, only_run, wait_for_step

pytestmark = pytest.mark.slow
DDP2 = ["--set", "dist.mode=ddp", "--set", "dist.nproc_per_node=2"]


def test_ddp_on_two_processes_completes_with_per_rank_events(runs_dir):
    amptui("run", "quickstart", *DDP2, "--set", "run.epochs=2", check=True)
    run_dir = only_run(runs_dir)
    rank0, rank1 = events(run_dir), events(run_dir, "events.rank1.jsonl")
    assert rank0[0]["world_size"] == 2 and rank1[0]["world_size"] == 2
    assert {r["rank"] for r in rank0} == {0} and {r["rank"] for r in rank1} == {1}
    steps0 = [r for r in rank0 if r["kind"] == "step"]
    steps1 = [r for r in rank1 if r["kind"] == "step"]
    assert steps0[-1]["loss"] < steps0[0]["loss"]
    assert [s["step"] for s in steps0] == [s["step"] for s in steps1]
    assert all(s["loss"] == t["loss"] for s, t in zip(steps0, steps1)), "the loss is reduced across ranks"
    assert all("rss" in s["mem"] for s in steps1), "every rank reports its own memory"
    # each rank sees half the samples, so an epoch has half the steps of one process
    assert rank0[0]["steps_per_epoch"] == 4096 // 64 // 2
    assert rank0[-1]["status"] == "completed"
    log = (run_dir / "output.log").read_text()
    assert "[rank 0] start" in log and "[rank 1] start" in log


def test_ddp_stop_and_resume(runs_dir):
    run_id = amptui("run", "quickstart", *DDP2, "--detach", check=True).stdout.strip().splitlines()[-1]
    run_dir = runs_dir / run_id
    wait_for_step(run_dir, timeout=60)
    assert "stopped" in amptui("stop", run_id, check=True).stdout
    stopped_at = events(run_dir)[-1]["steps"]
    amptui("resume", run_id, check=True)
    recs = events(run_dir)
    assert [r.get("resumed_from") for r in recs if r["kind"] == "start"] == [None, stopped_at]
    steps = [r["step"] for r in recs if r["kind"] == "step"]
    assert steps == sorted(set(steps)) and steps[-1] == recs[0]["total_steps"]
    assert runs.load_run(run_dir).status == "completed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_loopback_train_together(runs_dir):
    common = ["run", "quickstart", "--set", "dist.mode=ddp", "--set", "dist.nnodes=2",
              "--set", f"dist.rdzv_endpoint=127.0.0.1:{free_port()}", "--set", "run.epochs=1"]
    nodes = [subprocess.Popen([sys.executable, "-m", "amptui", *common, "--set", f"dist.node_rank={k}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in (0, 1)]
    outputs = [node.communicate(timeout=240)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    folders = sorted(p for p in runs_dir.iterdir())
    assert len(folders) == 2
    files = sorted(f.name for d in folders for f in d.glob("events*.jsonl"))
    assert files == ["events.jsonl", "events.rank1.jsonl"]  # one global rank per node
    for d in folders:
        assert runs.load_run(d).status == "completed"
        start = next(r for r in events(d, next(d.glob("events*.jsonl")).name) if r["kind"] == "start")
        assert start["world_size"] == 2


def test_print_launch_shows_every_node(runs_dir):
    out = amptui("run", "quickstart", "--print-launch", "--set", "dist.mode=ddp", "--set", "dist.nnodes=3",
                 "--set", "dist.rdzv_endpoint=10.1.2.3:29400", check=True).stdout
    for node in range(3):
        assert f"--set dist.node_rank={node}" in out
    assert out.count("--rdzv-backend c10d --rdzv-endpoint 10.1.2.3:29400") == 3
    assert not runs_dir.exists(), "--print-launch starts nothing"


def test_a_failing_rank_is_named_quickly(runs_dir):
    started = time.monotonic()
    proc = amptui("run", "quickstart", *DDP2, "--set", "debug.fail_at_step=3", "--set", "debug.fail_rank=1",
                  "--set", "log.every=1")
    assert time.monotonic() - started < 60
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "injected failure at step 3 on rank 1" in proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed"
    assert end["error"]["rank"] == 1 and end["error"]["type"] == "RuntimeError"
    assert "Traceback" in end["error"]["traceback"]
    assert runs.load_run(run_dir).status == "failed"
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert listed[0]["status"] == "failed" and listed[0]["error"].startswith("rank 1: RuntimeError")
