"""Make the README's dashboard screenshots (SVG) from real runs on this machine.

    python screenshots/make_screenshots.py            # writes screenshots/*.svg

Runs a few short CPU runs with the real `amptui` in a scratch folder (about a minute), then drives
the dashboard headless at 110x34 and saves: the home screen, a live scaler-lab run with its
backoffs and growths, a failed run with its error, the compare screen (fp32 vs bf16) and the
help screen (? / F1) of the home screen; and, at 120x40, a float16 numerics-lab run with its
range-headroom heat map (`--only numerics` makes just that one, about a minute).

Each picture is written by the same export as the dashboard's `p` key, `amptui watch --svg` and
`amptui compare --format svg` (amptui.dashboard.picture.screen_svg): every glyph pinned to its
cell, so the plots stay inside their frames in any SVG viewer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = (110, 34)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE, help="where the SVGs go (default: screenshots/)")
    parser.add_argument("--only", choices=("numerics",), help="make only this picture")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="amptui-shots-"))
    os.environ["XDG_CONFIG_HOME"] = str(work / "config")
    os.environ["XDG_STATE_HOME"] = str(work / "state")  # a fresh user's: no runs folders, edits or theme of yours
    os.environ.pop("AMPTUI_RUNS_DIR", None)
    os.chdir(work)
    runs = work / "runs"

    def run(*sets: str, preset: str = "quickstart") -> str:
        command = [sys.executable, "-m", "amptui", "run", preset, "--runs-dir", str(runs)]
        for s in sets:
            command += ["--set", s]
        before = set(runs.iterdir()) if runs.exists() else set()
        subprocess.run(command, cwd=work, capture_output=True, text=True)
        (new,) = set(runs.iterdir()) - before
        return new.name

    print("real runs in", work)
    numerics = run("run.max_steps=16", preset="numerics-lab")
    print("  numerics-lab", numerics)
    if args.only == "numerics":
        asyncio.run(shoot_numerics(args.out, runs / numerics))
        print("wrote", args.out / "run-numerics-lab.svg")
        return 0
    fp32 = run("amp.autocast=false", "run.epochs=3")
    bf16 = run("run.epochs=3")
    failed = run("debug.fail_at_step=40")
    print("  fp32", fp32, "\n  bf16", bf16, "\n  failed", failed)
    live = subprocess.run([sys.executable, "-m", "amptui", "run", "scaler-lab", "--detach", "--runs-dir", str(runs),
                           "--set", "run.epochs=20"], cwd=work, capture_output=True, text=True,
                          check=True).stdout
    live = json.loads(live)["run_id"]  # --detach's one JSON line (docs/commands.md)
    print("  live", live)

    from amptui.dashboard.app import make_app
    from amptui.dashboard.picture import screen_svg
    from amptui.dashboard.screens.compare.screen import CompareScreen
    from amptui.dashboard.screens.run.screen import RunScreen
    from amptui.dashboard.widgets.runtable import RunTable

    def save(app, name: str) -> None:
        (args.out / name).write_text(screen_svg(app), encoding="utf-8")

    async def until(pilot, cond, timeout=120.0):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise SystemExit("timed out driving the dashboard")
            await pilot.pause(0.1)

    async def shoot() -> None:
        app = make_app("runs")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.screen.query(RunTable) and app.screen.query_one(RunTable).row_count >= 4)
            table = app.screen.query_one(RunTable)
            for rid in (fp32, bf16):
                table.move_cursor(row=table.run_ids.index(rid))
                table.action_toggle_mark()
            table.focus()
            table.move_cursor(row=0)
            await pilot.pause(0.5)
            save(app, "home.svg")
            await pilot.press("f1")
            await pilot.pause(0.5)
            save(app, "help.svg")
            await pilot.press("escape")

            app.open_run(runs / live)
            await until(pilot, lambda: isinstance(app.screen, RunScreen))
            screen = app.screen
            await until(pilot, lambda: screen.model.n_growth >= 4 and screen.model.n_backoff >= 10)
            await pilot.pause(0.8)
            save(app, "run-live-scaler.svg")
            await pilot.press("q")

            app.open_run(runs / failed)
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.run.end is not None)
            await pilot.pause(0.8)
            save(app, "run-failed.svg")
            await pilot.press("q")

            await pilot.pause(0.2)
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.rows)
            await pilot.pause(0.5)
            save(app, "compare.svg")

        small = make_app("runs")
        async with small.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: small.screen.query(RunTable) and small.screen.query_one(RunTable).row_count)
            await pilot.pause(1.5)  # the footer too, on a loaded box
            save(small, "home-80x24.svg")

    try:
        asyncio.run(shoot())
    finally:  # never leave the live scaler-lab run going
        subprocess.run([sys.executable, "-m", "amptui", "stop", live, "--runs-dir", str(runs)], cwd=work,
                       capture_output=True)
    asyncio.run(shoot_numerics(args.out, runs / numerics))
    for name in ("home", "help", "run-live-scaler", "run-failed", "compare", "home-80x24", "run-numerics-lab"):
        print("wrote", args.out / f"{name}.svg")
    return 0


async def shoot_numerics(out: Path, run_dir: Path) -> None:
    """numerics-lab in float16: the heat map beside the loss scale, blocks.3's MLP out of range."""
    from amptui.dashboard.app import make_app
    from amptui.dashboard.picture import screen_svg

    app = make_app("runs", watch=run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 60
        while not (getattr(app.screen, "drawn", lambda: False)() and app.screen.model.numerics.records):
            if time.monotonic() > deadline:
                raise SystemExit("timed out drawing the numerics-lab run")
            await pilot.pause(0.1)
        await pilot.pause(0.8)
        (out / "run-numerics-lab.svg").write_text(screen_svg(app), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
