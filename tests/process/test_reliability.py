"""Faults done for real: signals to the trainer, a full disk and a death mid-checkpoint, runs
started together, a resume whose config changed, and random hostile config input."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from support.cli import amptui, started
from support.records import events, events_so_far, only_run, wait_for_end, wait_for_step
from support.waits import wait_until

from amptui.trainer import checkpoint

# --- checkpoints under a full disk and a death mid-write ------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    """A real 256 KiB filesystem (tmpfs), so a write really fails with ENOSPC."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow  # mount and umount a tmpfs
def test_a_full_disk_keeps_the_previous_checkpoint(tiny_disk):
    checkpoint.save(tiny_disk, {"step": 1, "w": torch.ones(100)})
    with pytest.raises(OSError):
        checkpoint.save(tiny_disk, {"step": 2, "w": torch.ones(1_000_000)})  # 4 MB: does not fit
    assert checkpoint.load(tiny_disk)["step"] == 1
    assert [p.name for p in tiny_disk.iterdir()] == ["last.pt"], "the failed temp file is removed"


@pytest.mark.slow
def test_death_mid_write_keeps_the_previous_checkpoint(tmp_path):
    script = textwrap.dedent(f"""
        import sys, torch
        from pathlib import Path
        from amptui.trainer import checkpoint
        d = Path({str(tmp_path)!r})
        checkpoint.save(d, {{"step": 1}})
        print("saved", flush=True)
        checkpoint.save(d, {{"step": 2, "w": [torch.randn(4_000_000) for _ in range(40)]}})
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "saved"
    wait_until(lambda: list(tmp_path.glob(".last.pt.*.tmp")), 30, "the checkpoint's temporary file", step=0.005)
    child.kill()
    child.wait()
    assert checkpoint.load(tmp_path)["step"] == 1
    checkpoint.save(tmp_path, {"step": 3})  # the next save clears what the dead writer left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert checkpoint.load(tmp_path)["step"] == 3


# --- real trainer processes -----------------------------------------------------------------------

def start_detached(*sets):
    args = [a for s in sets for a in ("--set", s)]
    return started(amptui("run", "quickstart", "--detach", *args, check=True).stdout)["run_id"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_checkpoint_then_stop(runs_dir, sig):
    run_id = start_detached("run.epochs=50")
    run_dir = runs_dir / run_id
    wait_for_step(run_dir, 10)
    pid = json.loads((run_dir / "run.json").read_text())["pid"]
    os.kill(pid, sig)
    recs = wait_for_end(run_dir)
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "stopped"
    assert recs[-2]["kind"] == "checkpoint" and recs[-2]["step"] == recs[-1]["steps"]
    assert torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["progress"]["step"] == recs[-1]["steps"]


@pytest.mark.slow
def test_runs_started_together_get_their_own_folders(runs_dir):
    procs = [subprocess.Popen([sys.executable, "-m", "amptui", "run", "quickstart", "--detach",
                               "--set", "run.max_steps=4"], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    ids = [started(p.communicate(timeout=120)[0])["run_id"] for p in procs]
    assert len(set(ids)) == 3
    for run_id in ids:
        run_dir = runs_dir / run_id
        recs = wait_for_end(run_dir)
        assert {r["run_id"] for r in recs if r["kind"] == "start"} == {run_id}, "no shared files"
        assert recs[-1]["status"] == "completed"


@pytest.mark.slow
def test_resume_after_the_config_changed(runs_dir):
    amptui("run", "quickstart", "--set", "run.max_steps=8", "--set", "log.checkpoint_every_steps=4",
           "--set", "debug.fail_at_step=6", "--set", "log.every=1")
    run_dir = only_run(runs_dir)
    cfg_path = run_dir / "config.toml"
    original = cfg_path.read_text()
    cfg_path.write_text(original.replace("width = 16", "width = 32"))
    refused = amptui("resume", run_dir.name)
    assert refused.returncode == 2 and "model.width 16 -> 32" in refused.stderr and "Traceback" not in refused.stderr
    assert [r["kind"] for r in events(run_dir)].count("start") == 1, "a refused resume starts nothing"
    cfg_path.write_text(original.replace("fail_at_step = 6", "fail_at_step = 0").replace("lr = 0.003", "lr = 0.002"))
    ckpt = run_dir / "checkpoints" / "last.pt"
    state = torch.load(ckpt, weights_only=True)
    state["code"] = "0.0.1+000000000000"  # as if written by an older amptui
    torch.save(state, ckpt)
    amptui("resume", run_dir.name, check=True)
    warnings = {r.get("code"): r["message"] for r in events(run_dir) if r["kind"] == "warning"}
    assert "optim.lr 0.003 -> 0.002" in warnings["resume_config_changed"]
    assert "0.0.1+000000000000 ->" in warnings["resume_code_changed"]
    assert events(run_dir)[-1]["status"] == "completed"


@pytest.mark.slow
@pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0, reason="needs tmux")
@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.timeout(1200)  # 192 steps of quickstart: minutes on a loaded 2-core box; the bounds below say which wait ran out
def test_a_run_survives_its_terminal_closing(runs_dir, isolated, detach):
    """Start a run in a real terminal (tmux), close the terminal mid-run: the run completes."""
    session = f"amptui-hup-{os.getpid()}-{int(detach)}"
    flags = "--detach" if detach else ""
    command = (f"cd {isolated} && {sys.executable} -m amptui run quickstart {flags} --set run.epochs=3 "
               f"--runs-dir {runs_dir}; sleep 600")
    tmux = ["tmux", "-L", session, "-f", os.devnull]  # a private server: a running one would lend its environment
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "100", "-y", "20", command], check=True)
    try:
        def stepped():
            found = list(runs_dir.glob("*/events.jsonl")) if runs_dir.exists() else []
            return found[0].parent if found and any(r["kind"] == "step" for r in events_so_far(found[0].parent)) else None

        # bounds, not targets: 192 quickstart steps took over 120 s on a loaded 2-core box (CI's slow lane)
        run_dir = wait_until(stepped, 300, "the run's first step", step=0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)  # the terminal closes
    assert wait_for_end(run_dir, timeout=900)[-1]["status"] == "completed"


# --- one writer per run folder: the lock ---------------------------------------------------------

def _hold_lock(run_dir):
    """Another process that takes the run's lock (as a trainer does) and keeps it until killed."""
    code = ("import sys, time; from pathlib import Path; from amptui.core.run import runlock; "
            "runlock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _ended_run(tmp_path, status="stopped"):
    from amptui.core.run import runs

    run_dir = tmp_path / "runs" / "20990101-000000-lock"
    run_dir.mkdir(parents=True)
    (run_dir / "config.toml").write_text('[run]\nname = "quickstart"\n')
    lines = [{"v": 1, "kind": "start", "t": 100.0, "rank": 0},
             {"v": 1, "kind": "end", "t": 110.0, "rank": 0, "status": status, "steps": 4}]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run_dir, runs


@pytest.mark.slow
def test_the_lock_tells_running_from_killed(tmp_path):
    """A live holder means running, even while a resumed session has not written its start yet;
    its death (SIGKILL) frees the lock at once: no stale lock, the last end record speaks again."""
    run_dir, runs = _ended_run(tmp_path)
    assert runs.load_run(run_dir).status == "stopped"  # no lock file: the end record (pid fallback)
    holder = _hold_lock(run_dir)
    try:
        assert runs.load_run(run_dir).status == "running"
        from amptui.core.run import runlock

        with pytest.raises(runlock.RunLocked, match=f"in use by pid {holder.pid} "):
            runlock.acquire(run_dir)
    finally:
        holder.kill()
        holder.wait()
    assert runs.load_run(run_dir).status == "stopped"
    (run_dir / "events.jsonl").write_text(json.dumps({"v": 1, "kind": "start", "t": 100.0, "rank": 0}) + "\n")
    assert runs.load_run(run_dir).status == "killed"  # no end record, lock free: nobody alive


@pytest.mark.slow
def test_a_lock_handed_to_a_child_has_no_gap(tmp_path):
    """What `amptui run/resume` does: take the lock, start the child with it, let go; the child
    adopts it (AMPTUI_LOCK_FD) and holds it alone; a stale variable never fakes a lock."""
    from amptui.core.run import runlock

    run_dir, runs = _ended_run(tmp_path)
    code = ("import sys, time; from pathlib import Path; from amptui.core.run import runlock; "
            "lock = runlock.hold_for_this_process(Path(sys.argv[1])); print(lock.fd, flush=True); time.sleep(600)")
    with runlock.acquire(run_dir) as lock:
        env = {**os.environ, runlock.FD_ENV: str(lock.fd)}
        child = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True,
                                 env=env, pass_fds=(lock.fd,))
    try:
        assert child.stdout.readline().strip().isdigit()
        assert f"pid {child.pid} " in runlock.in_use_message(run_dir)
        assert runs.load_run(run_dir).status == "running"
    finally:
        child.kill()
        child.wait()
    assert runs.load_run(run_dir).status == "stopped"
    # a variable naming some other descriptor: the child takes the lock itself instead
    with open(os.devnull) as other:
        env = {**os.environ, runlock.FD_ENV: str(other.fileno())}
        child = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True,
                                 env=env, pass_fds=(other.fileno(),))
    try:
        assert child.stdout.readline().strip().isdigit()
        assert runs.load_run(run_dir).status == "running"
    finally:
        child.kill()
        child.wait()
