"""Read-only as default-deny (issue 40): every action of every screen is classed once, watch or change,
and a read-only dashboard runs only the first class. The walk presses every binding and picks every
palette command of every screen of a read-only dashboard over a runs folder with a running A/B and a
running tune, and checks that nothing was started, signalled or written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.dashboard import (
    LIVE,
    QUICK,
    SCALER,
    app_for,
    async_test,
    copy_runs,
    home_ready,
    select_run,
    settled,
    until,
)

from amptui.core.run.runs import launch_identity
from amptui.dashboard.screens.help import HelpScreen
from amptui.dashboard.screens.keys import READ_ONLY_ENV
from amptui.jobs import groups, signals

TUNE_ID = "20261121-231600-quickstart-tune-8a42"
LEAVING = {"quit", "back", "detach", "leave", "close"}  # they only leave the screen (WATCH); the walk stays on it


def files_under(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def stand_in():
    """A live process standing in for `amptui ab` and `amptui tune`: what S would signal or cancel."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


def running_ab_and_tune(root: Path, pid: int) -> groups.Group:
    group = groups.create(root, "quickstart", "quickstart", {}, None, lambda g: launch_identity(pid))
    group.update(state="running", runs=[QUICK], variants=["fp32", "bf16"])
    (root / f"{TUNE_ID}.tune.json").write_text(json.dumps({
        "tune_id": TUNE_ID, "preset": "quickstart", "status": "running", **launch_identity(pid), "budget_s": 600,
        "started": time.time(), "trials": [{"candidate": "bf16", "run_id": SCALER, "status": "running"}]}))
    return group


@pytest.mark.slow
@async_test
async def test_a_read_only_dashboard_walk_starts_signals_and_writes_nothing(tmp_path, root, monkeypatch, stand_in):
    from amptui.dashboard.screens.compare.screen import CompareScreen
    from amptui.dashboard.screens.run.screen import RunScreen
    from amptui.dashboard.screens.tune.screen import TuneScreen

    copy_runs(root, live=True)
    group = running_ab_and_tune(root, stand_in.pid)
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    done: list[str] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: done.append(f"started {a}") or pytest.fail("started"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: done.append(f"ran {a}") or pytest.fail("ran"))
    monkeypatch.setattr(signals.Handle, "send", lambda self, signum: done.append(f"signal {signum}") or True)
    monkeypatch.setattr(signals.Handle, "end_family", lambda self, *a: done.append("ended") or [])
    monkeypatch.setattr(os, "kill", lambda *a: done.append(f"os.kill{a}"))
    monkeypatch.setattr(os, "killpg", lambda *a: done.append(f"os.killpg{a}"))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 4)
        await select_run(pilot, QUICK)
        screens = [lambda: home, lambda: RunScreen(root / LIVE), lambda: CompareScreen([root / QUICK, root / SCALER]),
                   lambda: TuneScreen(root / f"{TUNE_ID}.tune.json", None, "quickstart"), lambda: HelpScreen(home)]
        await settled(pilot)  # the first run list read and shown: what it wrote is in `before`
        before = files_under(tmp_path)
        walked = 0
        for make in screens:
            screen = make()
            if screen is not home:
                app.push_screen(screen)
                await until(pilot, lambda: app.screen is screen)
                await settled(pilot)
            actions = [b.action for b in type(screen).BINDINGS if not b.action.startswith("why_not")]
            commands = [c for c in app.get_system_commands(screen) if c.title.split()[0].lower() not in LEAVING]
            titles = [c.title for c in commands]
            for kind, name in [*(("action", a) for a in actions if a not in LEAVING), *(("command", t) for t in titles)]:
                if kind == "action":
                    result = app.run_action(name, screen)
                else:
                    result = next(c for c in app.get_system_commands(screen) if c.title == name).callback()
                if hasattr(result, "__await__"):
                    await result
                await pilot.pause()
                walked += 1
                while app.screen is not screen and screen in app.screen_stack:
                    app.pop_screen()
                    await pilot.pause()
                if screen not in app.screen_stack:  # back / leave took it away: a fresh one again
                    screen = make()
                    app.push_screen(screen)
                    await until(pilot, lambda: app.screen is screen)
            if screen is not home:
                app.pop_screen()
                await until(pilot, lambda: app.screen is home)
        await settled(pilot)
        after = files_under(tmp_path)
    monkeypatch.undo()  # os.kill again, for the stand-in's end
    assert walked > 60
    assert done == []
    assert after == before, {k for k in after.keys() | before.keys() if after.get(k) != before.get(k)}
    assert stand_in.poll() is None and not group.cancel_file.exists()
