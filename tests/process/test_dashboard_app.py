"""Pilot tests of the dashboard: every screen and key, driven headless on canned runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from support.dashboard import (
    Notes,
    app_for,
    async_test,
    home_ready,
    until,
)

from amptui.core.run.runs import load_run, read_launch_info
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.jobs import groups


@pytest.mark.slow  # real trainers
@async_test
async def test_a_runs_an_ab_as_one_group_and_compares_it_when_done(root, monkeypatch):
    """`a` starts a real A/B (fp32 and bf16 on this CPU) in the background: a second `a` of the same
    preset is refused while it runs; its runs are one group in Runs, each with its own output.log;
    the compare screen opens on them when the last one ends."""
    from amptui.dashboard.screens.home import launch as home_launch

    monkeypatch.setattr(home_launch, "LONG_AB_S", float("inf"))  # a busy machine's estimate asks no question here
    before = {p.name for p in root.iterdir()}
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        home.query_one("#t-run-max-steps").value = "4"
        home.query_one("#t-run-device").value = "cpu"
        home.query_one("#presets").focus()
        await pilot.press("a")
        await pilot.press("a")
        # each says at once that it is estimating; then one starts and the other is refused
        await until(pilot, lambda: any("already running" in m for m, _ in notes), timeout=240)
        refused = [(m, s) for m, s in notes if "already running" in m]
        assert len(refused) == 1 and refused[0][1] == "error", notes
        table = home.query_one(RunTable)
        await until(pilot, lambda: sum(1 for g in table.groups.values() if g == "ab1") >= 1, timeout=120)
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows, timeout=240)
        new = [p for p in root.iterdir() if p.name not in before and p.is_dir() and not p.name.startswith(".")]
        assert sorted(r.run_id for r in app.screen.rows) == sorted(p.name for p in new)
        assert sorted(load_run(p).precision for p in new) == ["bf16", "fp32"]
        assert all(load_run(p).status == "completed" and load_run(p).step == 4 for p in new)
        for p in new:  # each run its own log, holding only its own output
            text = (p / "output.log").read_text()
            assert f"start {p.name}" in text and not any(o.name in text for o in new if o != p)
        assert {table.groups.get(p.name) for p in new} == {"ab1"}
        assert [g.state for g in groups.groups(root)] == ["done"]


@pytest.mark.slow  # real trainers (an `amptui ab --detach` and its two variants)
@async_test
async def test_an_ab_whose_second_variant_fails_ends_failed_and_names_it_as_the_cli_does(root, monkeypatch):
    """`a` is `amptui ab --detach`: the CLI's loop and ending. Its second variant (bf16) dies: the
    group ends `failed` naming it, the notice says so, and the compare opens on what ran."""
    from amptui.dashboard.screens.home import launch as home_launch

    monkeypatch.setattr(home_launch, "LONG_AB_S", float("inf"))  # a busy machine's estimate asks no question here
    def second_trainer() -> int | None:
        found = groups.groups(root)
        return read_launch_info(root / found[0].runs[1]).get("pid") if found and len(found[0].runs) == 2 else None

    app = app_for(root)
    try:
        async with app.run_test(size=(110, 34)) as pilot:
            home = await home_ready(pilot)
            notes = Notes().install(app)
            home.query_one("#t-run-max-steps").value = "12"  # bf16's trainer is killed before its first step
            home.query_one("#t-run-device").value = "cpu"
            home.query_one("#presets").focus()
            await pilot.press("a")
            await until(pilot, second_trainer, timeout=400, step=0.02)
            os.killpg(second_trainer(), signal.SIGKILL)  # the trainer leads a session of its own
            await until(pilot, lambda: "did not complete" in notes.text(), timeout=120)
            group = groups.groups(root)[0]
            assert group.state == "failed" and group.error == "variant(s) bf16 did not complete"
            assert [(m, s) for m, s in notes if "did not complete" in m] == \
                [("variant(s) bf16 did not complete", "error")]
            await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows, timeout=60)
            assert [load_run(root / r).status for r in group.runs] == ["completed", "killed"]
        assert "amptui: error: variant(s) bf16 did not complete" in group.log.read_text()
    finally:  # a failed test leaves no A/B running in the background
        for found in groups.groups(root):
            for pid in [found.launch.get("pid")] + [read_launch_info(root / r).get("pid") for r in found.runs]:
                if pid and found.active:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)


@pytest.mark.slow  # a fresh interpreter
def test_dashboard_paints_without_importing_torch(root):
    # How fast it paints is benchmarks/startup.py's question (a wall-clock bound failed here under load).
    code = (
        "import sys, asyncio\n"
        "from amptui.dashboard.app import make_app\n"
        "async def main():\n"
        "    app = make_app('runs')\n"
        "    async with app.run_test(size=(110, 34)) as pilot:\n"
        "        await pilot.pause()\n"
        "        print('painted', type(app.screen).__name__)\n"
        "asyncio.run(main())\n"
        "assert 'torch' not in sys.modules and 'amptui.trainer' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "painted" in proc.stdout
