"""Many runs (issue 15): 300 run folders listed by `amptui runs` and by the home screen.

    python benchmarks/many_runs.py [--count 300] [--repeats 5]

Copies a finished quickstart run (tests/fixtures/runs) `--count` times into a temp runs folder
(each with a free lock file, as a finished run has), then measures, median of --repeats:
- `amptui runs --format json`: wall time of a fresh process (one untimed warm-up first);
- `core.runs.list_runs` in this process (what the command spends on the runs themselves);
- the home screen (a headless Textual pilot, 120x40): from the app starting until its run table
  holds every run.
Goal: each < 2 s. Prints a table; exits 0 whether or not the goal is met.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "runs" / "20261121-231544-quickstart-8ab8"
GOAL_S = 2.0


def make_runs(root: Path, count: int) -> None:
    for i in range(count):
        target = root / f"20990101-{i:06d}-quickstart-many"
        shutil.copytree(FIXTURE, target)
        (target / "lock").touch()


def time_cli(root: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "amptui", "runs", "--format", "json", "--runs-dir", str(root)],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def time_list_runs(root: Path, count: int) -> float:
    from amptui.core.run.runs import list_runs

    t0 = time.perf_counter()
    assert len(list_runs(root)) == count
    return time.perf_counter() - t0


def time_home(root: Path, count: int) -> float:
    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.home.screen import HomeScreen
    from amptui.dashboard.widgets.runtable import RunTable

    async def go() -> float:
        t0 = time.perf_counter()
        app = make_app(root)
        async with app.run_test(size=(120, 40)) as pilot:
            while not (isinstance(app.screen, HomeScreen) and app.screen.query_one(RunTable).row_count == count):
                await pilot.pause(0.01)
            return time.perf_counter() - t0

    return asyncio.run(go())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        make_runs(root, args.count)
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "xdg")
        time_cli(root)  # warm-up: .pyc files
        rows = [("amptui runs --format json", [time_cli(root) for _ in range(args.repeats)]),
                ("core.runs.list_runs", [time_list_runs(root, args.count) for _ in range(args.repeats)]),
                ("home screen, all rows", [time_home(root, args.count) for _ in range(args.repeats)])]
    load = os.getloadavg()[0]
    print(f"{args.count} runs, median of {args.repeats}; load average {load:.1f} on {os.cpu_count()} CPUs")
    for name, times in rows:
        median = statistics.median(times)
        print(f"{name:<28} {median:6.2f} s  {'PASS' if median < GOAL_S else 'MISS'} (goal < {GOAL_S:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
