"""`amptui sky`: the SkyPilot task it writes (parsed as YAML, checked by SkyPilot's own schema where
skypilot is installed and always against the keys SkyPilot's task reference documents), its
refusals and warnings, and its run section executed by bash with stand-ins for SkyPilot's
variables: two loopback "nodes" (CPU, gloo) complete one run; a recovered task resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.records import events

yaml = pytest.importorskip("yaml")  # the test extra has pyyaml (skypilot reads tasks with it)

TINY = ["--set", "run.max_steps=4", "--set", "log.every=2", "--set", "data.train_samples=256",
        "--set", "data.val_samples=64", "--set", "run.device=cpu"]


def task_of(cli, *args: str) -> dict:
    return yaml.safe_load(cli("sky", *args, check=True).stdout)


# --- the run section on loopback stand-ins ------------------------------------------------------------

def node_env(rank: int, nodes: int, task_id: str) -> dict[str, str]:
    """What SkyPilot sets on node `rank` (docs: environment variables), for nodes on 127.0.0.1
    with no GPU (the stand-in's SKYPILOT_NUM_GPUS_PER_NODE=0: one CPU process per node)."""
    venv = str(Path(sys.executable).parent)  # python3 and torchrun, as setup installed them
    return {**os.environ, "PATH": f"{venv}{os.pathsep}{os.environ['PATH']}", "SKYPILOT_NODE_RANK": str(rank),
            "SKYPILOT_NODE_IPS": "\n".join(["127.0.0.1"] * nodes), "SKYPILOT_NUM_NODES": str(nodes),
            "SKYPILOT_NUM_GPUS_PER_NODE": "0", "SKYPILOT_TASK_ID": task_id, "AMPTUI_SKY_WAIT_S": "120"}


def run_nodes(task: dict, nodes: int, task_id: str, cwd: Path) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(["bash", "-c", task["run"]], cwd=cwd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env={**node_env(rank, nodes, task_id), **task["envs"]})
             for rank in range(nodes)]
    done = []
    for proc in procs:
        out, _ = proc.communicate(timeout=200)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, ""))
    return done


@pytest.mark.slow
@pytest.mark.timeout(260)
def test_the_run_section_starts_a_two_node_torchrun_on_loopback(cli, tmp_path, free_port):
    shared = tmp_path / "shared-runs"
    task = task_of(cli, "quickstart", "--nodes", "2", "--gpus", "H100:8", "--runs-dir", str(shared),
                   "--port", str(free_port), *TINY)
    done = run_nodes(task, 2, "sky-2026-11-27-19-30-01-123456_c_1", tmp_path)
    assert [p.returncode for p in done] == [0, 0], [p.stdout[-3000:] for p in done]
    [run_dir] = [d for d in shared.iterdir() if d.is_dir()]
    assert sorted(f.name for f in run_dir.glob("events*.jsonl")) == ["events.jsonl", "events.rank1.jsonl"]
    starts = [next(r for r in events(run_dir, n) if r["kind"] == "start") for n in ("events.jsonl", "events.rank1.jsonl")]
    assert [(s["rank"], s["world_size"]) for s in starts] == [(0, 2), (1, 2)]  # node 0 holds global rank 0
    assert events(run_dir)[-1]["status"] == "completed"
    listed = json.loads(cli("runs", "--runs-dir", str(shared), "--format", "json", check=True).stdout)
    assert [(r["run_id"], r["status"], r["world_size"]) for r in listed] == [(run_dir.name, "completed", 2)]


@pytest.mark.slow
@pytest.mark.timeout(260)
def test_a_recovered_task_resumes_from_the_runs_last_checkpoint(cli, tmp_path, free_port):
    """A managed job that recovers runs the same task again (same SKYPILOT_TASK_ID): the run goes on
    from its checkpoint. The first try fails at step 3 (a stand-in for the preemption), after the
    checkpoint of step 2; the fault is then taken out of config.toml, as new machines would not fail."""
    shared = tmp_path / "shared-runs"
    task = task_of(cli, "quickstart", "--nodes", "1", "--gpus", "cpu", "--runs-dir", str(shared),
                   "--port", str(free_port), *TINY, "--set", "run.max_steps=6", "--set", "log.checkpoint_every_steps=2",
                   "--set", "debug.fail_at_step=3")
    task_id = "sky-managed-2026-11-27-19-40-00-000001_job_7-0"
    [first] = run_nodes(task, 1, task_id, tmp_path)
    assert first.returncode != 0
    [run_dir] = [d for d in shared.iterdir() if d.is_dir()]
    assert events(run_dir)[-1]["status"] == "failed"
    config = run_dir / "config.toml"
    config.write_text(config.read_text().replace("fail_at_step = 3", "fail_at_step = 0"))
    [second] = run_nodes(task, 1, task_id, tmp_path)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "resuming from its last checkpoint" in second.stdout
    assert [d.name for d in shared.iterdir() if d.is_dir()] == [run_dir.name]  # the same run, not a new one
    starts = [r for r in events(run_dir) if r["kind"] == "start"]
    assert len(starts) == 2 and starts[1].get("resumed_from") is not None
    end = events(run_dir)[-1]
    assert (end["status"], end["steps"]) == ("completed", 6)


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
