"""End to end, as a person would: the real `amptui` in tmux at 110x34 and a real CPU run.

Also: ? (help), s stop, R resume and x delete on a real run, in tmux.

`amptui` shows the presets; r on quickstart opens the run screen, whose panels fill with live
numbers; d then q leaves the run going; `amptui` again lists it and w reattaches with the full
history. Skipped when tmux is missing (.ci/run installs it with apt-get).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest
from support.dashboard import until
from support.shell import AMPTUI, terminal_env
from support.tmux import Tmux
from support.waits import wait_until

pytestmark = pytest.mark.slow
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
STEPS = 70


@needs_tmux
def test_tmux_run_detach_quit_reopen_and_reattach(tmp_path):
    tmux = Tmux(tmp_path, terminal_env(tmp_path))
    runs = tmp_path / "runs"
    try:
        tmux.type_line(f"{AMPTUI} ; echo AMPTUI-EXIT=$?")
        home = tmux.wait_for(lambda s: "Presets" in s and "quickstart" in s and "built-in" in s, 60, "home")
        assert "Run" in home and "Compare" in home and "Quit" in home  # the footer keys
        # keep it short: max steps 70 (one epoch of quickstart and a bit), typed into its toggle
        tmux.send(*["Tab"] * 11)  # the presets, then ten toggles before max steps (the last one)
        for attempt in range(5):
            time.sleep(0.3)
            tmux.send("C-u")
            time.sleep(0.3)
            tmux.send("-l", str(STEPS))
            try:
                # the field itself: the summary line below it may be cut short where this CPU adds a
                # notice (e.g. bfloat16 emulated), which pushes "at most 70 steps" out of view
                tmux.wait_for(lambda s: re.search(rf"max steps {STEPS}\b", s), 3, "the max steps toggle")
                break
            except AssertionError:
                if attempt == 4:
                    raise
        tmux.send("Escape")
        time.sleep(0.6)  # a lone ESC is told from an escape sequence by the pause after it
        # out of the field (its footer says "Leave field"), so r is a key again, not a letter; on a
        # loaded box ESC and r must not reach the app together (that reads as alt+r)
        tmux.wait_for(lambda s: "Leave field" not in s and "r Run" in s, 30, "the field left")
        tmux.send("r")
        live = tmux.wait_for(lambda s: re.search(rf"step [1-9]\d*/{STEPS}", s) is not None and "ETA" in s, 240,
                             "live numbers on the run screen")
        assert ("autocast bfloat16" in live or "fp32" in live) and "running" in live  # fp32 where bf16 is slow
        assert "loss" in live and "throughput" in live and "memory" in live
        tmux.wait_for(lambda s: "waiting for data" not in s.split("learning rate")[0], 60, "loss plot")
        tmux.send("d")
        tmux.wait_for(lambda s: "Presets" in s and ("running" in s or "completed" in s), 60, "home after detach")
        tmux.send("q")
        tmux.wait_for(lambda s: "AMPTUI-EXIT=0" in s, 60, "a clean exit")

        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        from amptui.core.run.runs import load_run

        assert load_run(run_dir).status in ("running", "completed")  # quitting did not stop it

        tmux.send("clear", "Enter")
        tmux.type_line(f"{AMPTUI} ; echo AMPTUI-EXIT=$?")
        tmux.wait_for(lambda s: run_dir.name in s, 60, "the run in the history")
        tmux.send("w")
        tmux.wait_for(lambda s: run_dir.name in s and "elapsed" in s, 60, "reattached run screen")
        done = tmux.wait_for(lambda s: "completed" in s and f"step {STEPS}/{STEPS}" in s, 180, "the run completing")
        assert "100%" in done
        tmux.wait_for(lambda s: re.search(r"val acc \d", s) is not None, 30, "full history in the loss panel")
        tmux.send("q")
        tmux.wait_for(lambda s: "Presets" in s, 60, "home again")
        tmux.send("q")
        tmux.wait_for(lambda s: s.count("AMPTUI-EXIT=0") >= 1 and "Presets" not in s, 60, "exit")
        end = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if '"kind":"end"' in line]
        assert end and end[-1]["status"] == "completed"
    finally:
        tmux.kill()
        for run_dir in runs.glob("*") if runs.exists() else []:
            info = run_dir / "run.json"
            if info.exists():  # never leave a trainer behind
                pid = json.loads(info.read_text()).get("pid")
                try:
                    os.killpg(pid, 15)
                except (ProcessLookupError, PermissionError, TypeError):
                    pass


@needs_tmux
def test_tmux_help_stop_resume_and_delete(tmp_path):
    """? lists the keys; on a real run s + y stops it, R resumes it from its checkpoint (same
    run, its steps go on), and x + y on home deletes the stopped run's folder."""
    env = terminal_env(tmp_path)
    out = subprocess.run([str(AMPTUI), "run", "scaler-lab", "--detach", "--set", "run.epochs=50",
                          "--set", "run.device=cpu"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "runs" / json.loads(out.stdout)["run_id"]
    tmux = Tmux(tmp_path, env)
    try:
        tmux.type_line(f"{AMPTUI} ; echo AMPTUI-EXIT=$?")
        tmux.wait_for(lambda s: "Presets" in s and "running" in s, 60, "home with the run")
        tmux.send("?")
        tmux.wait_for(lambda s: "Keys of the home screen" in s and "Resume" in s and "Delete" in s, 30, "help")
        tmux.send("Escape")
        tmux.wait_for(lambda s: "Keys of the home screen" not in s, 30, "help closed")
        tmux.send("w")
        tmux.wait_for(lambda s: re.search(r"step [1-9]\d*/", s) is not None and "running" in s, 90, "the run, live")
        tmux.send("s")
        tmux.wait_for(lambda s: "Stop run" in s, 30, "the confirm")
        tmux.send("y")
        stopped = tmux.wait_for(lambda s: "■ stopped" in s and "R continues it" in s, 90, "stopped")
        assert " Stop " not in stopped.splitlines()[-1]  # the footer no longer offers s
        steps_before = int(re.search(r"step (\d+)/", stopped).group(1))
        tmux.send("R")
        tmux.wait_for(lambda s: "● running" in s, 90, "resumed")
        resumed = tmux.wait_for(lambda s: (m := re.search(r"step (\d+)/", s)) and int(m.group(1)) > steps_before,
                                90, "steps going on")
        assert "resumed" in resumed or "running" in resumed
        tmux.send("s")
        tmux.wait_for(lambda s: "Stop run" in s, 30, "the confirm")
        tmux.send("y")
        tmux.wait_for(lambda s: "■ stopped" in s, 90, "stopped again")
        tmux.send("q")
        tmux.wait_for(lambda s: "Presets" in s and "stopped" in s, 60, "home")
        tmux.send("x")
        tmux.wait_for(lambda s: "Delete run" in s, 30, "delete confirm")
        tmux.send("y")
        tmux.wait_for(lambda s: "no runs yet" in s, 60, "the run deleted")
        assert not run_dir.exists()
        tmux.send("q")
        tmux.wait_for(lambda s: "AMPTUI-EXIT=0" in s, 60, "a clean exit")
    finally:
        tmux.kill()
        info = run_dir / "run.json"
        if info.exists():
            try:
                os.killpg(json.loads(info.read_text())["pid"], 15)
            except (ProcessLookupError, PermissionError, KeyError, TypeError):
                pass


def test_stop_from_the_run_screen_stops_a_real_run(tmp_path, monkeypatch):
    """s, then y: the real trainer checkpoints and ends `stopped`; the screen says how to resume."""
    import asyncio

    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.modals import ConfirmModal
    from amptui.dashboard.screens.run.screen import RunScreen

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    out = subprocess.run([str(AMPTUI), "run", "scaler-lab", "--detach", "--runs-dir", "runs", "--set", "run.epochs=50"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "runs" / json.loads(out.stdout)["run_id"]

    async def drive():
        app = make_app("runs", watch=run_dir)
        async with app.run_test(size=(110, 34)) as pilot:
            screen = app.screen
            await until(pilot, lambda: screen.model.status == "running" and screen.model.run.step > 3, 90, 0.2)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
            await pilot.press("y")
            await until(pilot, lambda: screen.model.status == "stopped", 60, 0.2)
            # the screen renders the model on a timer: wait for the panel to say it, however slow the box
            await until(pilot, lambda: "amptui resume" in str(screen.query_one("#error-panel").render()), 60)
            assert isinstance(app.screen, RunScreen)

    try:
        asyncio.run(drive())
    finally:
        pid = json.loads((run_dir / "run.json").read_text()).get("pid")
        try:
            os.killpg(pid, 15)
        except (ProcessLookupError, PermissionError, TypeError):
            pass


@needs_tmux
@pytest.mark.timeout(900)  # 320 real steps: on a loaded 2-core box (xdist beside it) this takes minutes
def test_dashboard_killed_mid_run_leaves_the_run_going_and_reattach_shows_everything(tmp_path):
    """SIGKILL the dashboard (no chance to clean up) while its run trains: the run completes, and
    `amptui watch` afterwards shows the whole history."""
    import psutil

    from amptui.core.run.runs import load_run

    tmux = Tmux(tmp_path, terminal_env(tmp_path))
    runs = tmp_path / "runs"
    try:
        tmux.type_line(f"{AMPTUI} ; echo AMPTUI-EXIT=$?")
        tmux.wait_for(lambda s: "Presets" in s and "quickstart" in s, 60, "home")
        tmux.send("r")
        tmux.wait_for(lambda s: re.search(r"step [1-9]\d*/320", s) is not None, 240,
                        "the run screen, live")
        shell = int(subprocess.run([*tmux.tmux, "display-message", "-p", "-t", tmux.name, "#{pane_pid}"],
                                   capture_output=True, text=True, check=True).stdout)
        (dashboard,) = [p for p in psutil.Process(shell).children() if "amptui" in " ".join(p.cmdline())]
        dashboard.kill()
        tmux.wait_for(lambda s: "AMPTUI-EXIT=137" in s, 60, "the dashboard killed")
        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        assert load_run(run_dir).status == "running", "killing the dashboard did not touch the run"
        wait_until(lambda: load_run(run_dir).status != "running", 600, "the run to end", step=0.5)
        assert load_run(run_dir).status == "completed"
        tmux.send("reset", "Enter")
        tmux.type_line(f"{AMPTUI} watch {run_dir.name}")
        done = tmux.wait_for(lambda s: "completed" in s and "step 320/320" in s, 60, "the finished run")
        assert "100%" in done
        tmux.wait_for(lambda s: re.search(r"val acc \d", s) is not None, 30, "full history")
    finally:
        tmux.kill()
        for info in runs.glob("*/run.json") if runs.exists() else []:
            try:
                os.killpg(json.loads(info.read_text())["pid"], 15)
            except (ProcessLookupError, PermissionError, KeyError, TypeError):
                pass
