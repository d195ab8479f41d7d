"""DDP through real torchrun processes on gloo (CPU): one node, two nodes on loopback, stop and
resume, and a failing rank that explains itself."""

import contextlib
import json
import re
import socket
import subprocess
import sys
import time

import pytest
from support.cli import amptui, started
from support.records import events, only_run, wait_for_step

from amptui.core.run import runlock, runs
from amptui.core.run.runfiles import RunFolder
from amptui.jobs import forcestop, launch
from amptui.jobs.stderrtail import StderrTail
from amptui.trainer.torchrun import launch_failure

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
    run_id = started(amptui("run", "quickstart", *DDP2, "--detach", check=True).stdout)["run_id"]
    run_dir = runs_dir / run_id
    wait_for_step(run_dir, timeout=120)  # two ranks start slowly on a loaded machine
    proved = forcestop.writer(run_dir)  # what `stop` would end unanswered, without --force (issue 50.4)
    assert proved.pid == runlock.holder(run_dir)["pid"] and "amptui.trainer.torchrun" in proved.proc.cmdline()
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
    by_node = {RunFolder(d).load_config().dist.node_rank: d for d in folders}
    # the node started with node_rank 0 holds global rank 0 and the run's events.jsonl
    assert [f.name for f in by_node[0].glob("events*.jsonl")] == ["events.jsonl"]
    assert [f.name for f in by_node[1].glob("events*.jsonl")] == ["events.rank1.jsonl"]
    start0 = next(r for r in events(by_node[0]) if r["kind"] == "start")
    assert start0["rank"] == 0 and start0["world_size"] == 2
    start1 = next(r for r in events(by_node[1], "events.rank1.jsonl") if r["kind"] == "start")
    assert start1["rank"] == 1 and start1["world_size"] == 2
    for d in folders:
        assert runs.load_run(d).status == "completed"


def test_print_launch_shows_every_node(runs_dir):
    out = amptui("run", "quickstart", "--print-launch", "--set", "dist.mode=ddp", "--set", "dist.nnodes=3",
                 "--set", "dist.rdzv_endpoint=10.1.2.3:29400", check=True).stdout
    for node in range(3):
        assert f"--set dist.node_rank={node}" in out
        assert f"--node-rank {node} --rdzv-backend static --master-addr 10.1.2.3 --master-port 29400" in out
    assert not runs_dir.exists(), "--print-launch starts nothing"


def test_a_launch_that_fails_before_any_rank_starts_ends_failed(runs_dir):
    """The rendezvous port is taken: torchrun gives up before starting a rank; the run says why."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = amptui("run", "quickstart", "--set", "dist.mode=ddp", "--set", "dist.nnodes=2",
                      "--set", f"dist.rdzv_endpoint=127.0.0.1:{taken.getsockname()[1]}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "address already in use" in proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and end["steps"] == 0
    assert "address already in use" in end["error"]["message"]
    info = runs.load_run(run_dir)
    assert info.status == "failed" and "address already in use" in info.error


def test_torchrun_refusing_its_arguments_is_reported_in_its_own_words(tmp_path):
    """What an older torch does with a flag it lacks: argparse's error, which becomes the end record's."""
    from torch.distributed.run import main as torchrun

    with open(tmp_path / "output.log", "w") as log:
        tail = StderrTail(log)
        with contextlib.redirect_stderr(tail), pytest.raises(SystemExit) as exited:
            torchrun(["--no-such-flag", "-m", "amptui.trainer", "runs/x"])
    error = launch_failure(exited.value, tail.text())
    assert error["type"] == "TorchrunError"
    assert error["message"] == "unrecognized arguments: --no-such-flag"
    assert "unrecognized arguments: --no-such-flag" in (tmp_path / "output.log").read_text()


def launch_configs(tmp_path):
    yield launch.resolve_config(None, {"dist.mode": "ddp", "dist.nproc_per_node": 2, "run.device": "cpu"})
    yield launch.resolve_config(None, {"dist.mode": "ddp", "dist.nnodes": 3, "dist.node_rank": 2,
                                       "dist.rdzv_endpoint": "[::1]:29400", "run.device": "cpu"})
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    yield launch.resolve_config(None, {"dist.mode": "ddp", "run.script": str(script), "run.device": "cpu"})


def test_every_torchrun_option_is_accepted_by_the_installed_torch(tmp_path):
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    accepted = set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", parser.format_help()))  # every option it documents
    for cfg in launch_configs(tmp_path):
        args = launch.torchrun_args(cfg, tmp_path / "run", script_args=["--lr", "1"])
        options = [a for a in args[:args.index("--no-python")] if a.startswith("-")]
        assert set(options) <= accepted, options
        parsed = parser.parse_args(args)  # argparse exits on anything it does not accept
        assert parsed.nproc_per_node == str(cfg.dist.nproc_per_node)
        if cfg.dist.nnodes > 1:
            assert (parsed.rdzv_backend, parsed.master_addr, parsed.master_port, parsed.node_rank) == \
                ("static", "::1", 29400, 2)
        # the rank prefix: a flag where torch has it (2.14+), the environment variable where not
        env = launch.torchrun_env(cfg, tmp_path / "run")
        has_flag = "--log-line-prefix-template" in accepted
        assert ("--log-line-prefix-template" in args) == has_flag
        assert env == ({} if has_flag else {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[rank ${rank}] "})


def test_a_failing_rank_is_named_quickly(runs_dir):
    proc = amptui("run", "quickstart", *DDP2, "--set", "debug.fail_at_step=3", "--set", "debug.fail_rank=1",
                  "--set", "log.every=1")
    returned = time.time()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    # "Quickly" is counted from the failure (rank 1's end record), not from the start: starting two
    # ranks is slow on a loaded machine, while a run that hung would wait for gloo's 30-minute
    # collective timeout (or this test's). Seconds on any machine; 60 leaves room for a busy one.
    failed_at = events(only_run(runs_dir), "events.rank1.jsonl")[-1]
    assert failed_at["kind"] == "end" and failed_at["status"] == "failed", failed_at
    assert returned - failed_at["t"] < 60
    assert "injected failure at step 3 on rank 1" in proc.stderr
    run_dir = only_run(runs_dir)
    end = events(run_dir)[-1]
    assert end["kind"] == "end" and end["status"] == "failed"
    assert end["error"]["rank"] == 1 and end["error"]["type"] == "RuntimeError"
    assert "Traceback" in end["error"]["traceback"]
    assert runs.load_run(run_dir).status == "failed"
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert listed[0]["status"] == "failed" and listed[0]["error"].startswith("rank 1: RuntimeError")
