"""Shared helpers for the dashboard tests (canned runs, a frozen clock, waiting for workers)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from support.paths import FIXTURES

QUICK = "20261121-231544-quickstart-8ab8"
SCALER = "20261121-231557-scaler-lab-058d"
FAILED = "20261121-231609-quickstart-b640"
LIVE = "20261121-231700-scaler-lab-live"
NUMERICS = "20261124-061451-numerics-lab-123c"  # numerics-lab in float16: range samples every step (fixtures/numerics)
FROZEN_NOW = 1795302966.0  # a few seconds after the live fixture's last record


def copy_runs(root: Path, live: bool = False) -> Path:
    shutil.copytree(FIXTURES / "runs", root, dirs_exist_ok=True)
    if live:
        shutil.copytree(FIXTURES / "live" / LIVE, root / LIVE)
    return root


def finish_live_run(events: Path, steps: int) -> None:
    """The live fixture's trainer writes its last step records (to `steps`) and its end record."""
    import json

    last = json.loads(events.read_text().splitlines()[-2])  # the fixture's last step record (step 121)
    with events.open("a") as f:
        for step in range(122, steps + 1):
            f.write(json.dumps({**last, "step": step, "t": last["t"] + step * 0.03}) + "\n")
        f.write(json.dumps({"v": 1, "kind": "end", "t": last["t"] + 8, "rank": 0, "status": "completed",
                            "total_time_s": 8.0, "steps": steps, "final_loss": 1.5}) + "\n")


def copy_numerics_run(root: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "numerics" / NUMERICS, root / NUMERICS))


async def until(pilot, condition, timeout: float = 30.0, step: float = 0.05) -> None:
    """Wait for `condition` (polled between pauses); the deadline is generous because it only
    costs time when something is broken, and a loaded CI machine can be slow to get there."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(step)


async def settled(pilot) -> None:
    """Wait until the app has nothing left to do: every widget's messages handled (a layout, a
    refresh), animations done, the loop idle. A condition, not a fixed pause: it ends as soon as that
    holds, however loaded the machine."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def drawn_and_flushed(pilot, screen) -> None:
    """A run screen shows everything it has read (`drawn()`), its flush timer has run once more since
    (a layout changed by that draw has its plots rebuilt at their new size), and the app is idle: a
    picture taken now is final. A condition, however loaded the machine."""
    await until(pilot, screen.drawn)
    seen = screen.flushes
    await until(pilot, lambda: screen.flushes > seen)
    await settled(pilot)


class Notes(list):
    """Records app.notify calls: (message, severity)."""

    def install(self, app):
        original = app.notify

        def notify(message, *args, **kwargs):
            self.append((str(message), kwargs.get("severity", "information")))
            return original(message, *args, **kwargs)

        app.notify = notify
        return self

    def text(self) -> str:
        return "\n".join(m for m, _ in self)


def async_test(fn):
    """Run an async test with asyncio.run (no pytest async plugin needed)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture
def root(tmp_path, monkeypatch):
    """The canned runs in ./runs of a scratch folder, saved presets in a scratch config."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    return copy_runs(tmp_path / "runs")


def app_for(root, **kwargs):
    from amptui.dashboard.app import make_app

    return make_app(root, clock=lambda: FROZEN_NOW, **kwargs)


async def home_ready(pilot, rows: int = 1):
    from amptui.dashboard.screens.home.screen import HomeScreen
    from amptui.dashboard.widgets.runtable import RunTable

    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.query_one(RunTable).row_count >= rows)
    return app.screen


async def select_run(pilot, run_id):
    from amptui.dashboard.widgets.runtable import RunTable

    table = pilot.app.screen.query_one(RunTable)
    table.focus()
    await until(pilot, lambda: run_id in table.run_ids)
    table.move_cursor(row=table.run_ids.index(run_id))
    await pilot.pause()
