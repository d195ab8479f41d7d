"""Start-up benchmark (issue 7): `amptui --help` wall time and the dashboard's first paint.

    python benchmarks/startup.py [--help-runs 10] [--paint-runs 5]

- `amptui --help`: wall time of a fresh process (the venv's console script, output to
  /dev/null), median of --help-runs after one untimed warm-up run (so .pyc files exist, as on
  any installed system). Goal < 0.3 s.
- first paint: `amptui` (home screen) started in a 110x34 pseudo-terminal (benchmarks/ptyterm.py,
  TERM=xterm-256color) in an empty temp dir, with XDG_CONFIG_HOME and AMPTUI_RUNS_DIR pointing
  into it (no saved presets, no runs); time from spawning the process until the screen shows the
  preset list (the text "quickstart"), median of --paint-runs. Goal < 1.5 s.

Also printed, for diagnosis: time to the first byte the program writes and to its first frame.
Prints a table; exits 0 whether or not a goal is met.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ptyterm import PtyTerm, describe_amptui  # noqa: E402

AMPTUI = str(Path(sys.executable).with_name("amptui"))
HELP_GOAL_S, PAINT_GOAL_S = 0.3, 1.5
COLS, ROWS = 110, 34


def time_help(n: int) -> list[float]:
    subprocess.run([AMPTUI, "--help"], stdout=subprocess.DEVNULL, check=True)  # warm-up: .pyc
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([AMPTUI, "--help"], stdout=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t)
    return out


def first_paint_once() -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="amptui-startup-"))
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp / "config"), AMPTUI_RUNS_DIR=str(tmp / "runs"),
               HOME=str(tmp / "home"))
    (tmp / "home").mkdir()
    term = PtyTerm([AMPTUI], COLS, ROWS, env=env, cwd=str(tmp))
    try:
        _, shown = term.wait_for(lambda s: "quickstart" in s, 30, poll=0.005)
        first_byte = (term.first_output - term.t0) if term.first_output else None
        first_frame = (term.frame_times[0] - term.t0) if term.frame_times else None
        return {"shown_s": shown, "first_frame_s": first_frame, "load": os.getloadavg()[0],
                "screen": term.text(), "first_byte": first_byte}
    finally:
        term.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--help-runs", type=int, default=10)
    ap.add_argument("--paint-runs", type=int, default=5)
    ap.add_argument("--show-screen", action="store_true")
    args = ap.parse_args()
    try:
        import pyte  # noqa: F401
    except ImportError:
        print("needs pyte: pip install pyte (benchmark-only dependency)", file=sys.stderr)
        return 0
    print(describe_amptui(), flush=True)
    load0 = os.getloadavg()
    helps = time_help(args.help_runs)
    paints = []
    for i in range(args.paint_runs):
        r = first_paint_once()
        paints.append(r)
        if args.show_screen and i == 0:
            print(r["screen"])
    load1 = os.getloadavg()
    ok_paints = [p["shown_s"] for p in paints if p["shown_s"] is not None]
    help_med = statistics.median(helps)
    paint_med = statistics.median(ok_paints) if len(ok_paints) == len(paints) else None

    def fmt(xs):
        return " ".join(f"{x:.3f}" for x in xs)

    print(f"load average (1m/5m/15m) before {' '.join(f'{x:.2f}' for x in load0)}, "
          f"after {' '.join(f'{x:.2f}' for x in load1)}")
    print()
    print("| measure | median s | min s | max s | runs (s) | goal | result |")
    print("|---|---|---|---|---|---|---|")
    print(f"| `amptui --help` wall time | {help_med:.3f} | {min(helps):.3f} | {max(helps):.3f} | {fmt(helps)} "
          f"| < {HELP_GOAL_S} s | {'PASS' if help_med < HELP_GOAL_S else 'MISS'} |")
    if paint_med is None:
        print(f"| dashboard first paint (preset list) | never | | | | < {PAINT_GOAL_S} s | MISS |")
    else:
        print(f"| dashboard first paint (preset list) | {paint_med:.3f} | {min(ok_paints):.3f} | {max(ok_paints):.3f} "
              f"| {fmt(ok_paints)} | < {PAINT_GOAL_S} s | {'PASS' if paint_med < PAINT_GOAL_S else 'MISS'} |")
    firsts = [p["first_byte"] for p in paints if p["first_byte"] is not None]
    if firsts:
        print(f"| (first byte on the terminal) | {statistics.median(firsts):.3f} | {min(firsts):.3f} | "
              f"{max(firsts):.3f} | {fmt(firsts)} | | |")
    frames = [p["first_frame_s"] for p in paints if p["first_frame_s"] is not None]
    if frames:
        print(f"| (first synchronized frame) | {statistics.median(frames):.3f} | {min(frames):.3f} | "
              f"{max(frames):.3f} | {fmt(frames)} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
