"""What `amptui run --script` adds to a script's start-up and end (issue 34): an empty torch script
run by bare python and by amptui, in the same run, alternating.

    python benchmarks/script_startup.py [--runs 7]

- `python empty.py`: a fresh process of the venv's python running a script that only imports
  torch (what every training script pays before its first line of work).
- `amptui run --script empty.py`: the venv's console script, the run recorded in a temp runs
  folder, output to pipes (what a user pays: amptui's checks and run folder, the script's process
  under the hooks, following it to its end record, the summary).
- `amptui --help`, for the CLI's own import cost (goal < 0.3 s, benchmarks/startup.py).

Each is timed from spawn to exit, one untimed warm-up of each first (.pyc files, the page cache),
then --runs rounds in which the three alternate, so a load that comes and goes hits them alike.
Prints the medians of wall time and of CPU time (user + system of the command and every process
it started: what a loaded machine cannot inflate the way it inflates wall time), the difference
to bare python, PASS/MISS against the goal (amptui within 1 s of python, wall) and the load
average; exits 0 either way.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ptyterm import describe_amptui  # noqa: E402

PYTHON = sys.executable
AMPTUI = str(Path(sys.executable).with_name("amptui"))
SCRIPT_GOAL_S, HELP_GOAL_S = 1.0, 0.3


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for)."""
    t, cpu = time.perf_counter(), _cpu_s()
    proc = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')}")
    return seconds, _cpu_s() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    print(describe_amptui(), flush=True)
    with tempfile.TemporaryDirectory(prefix="amptui-script-startup-") as tmp:
        folder = Path(tmp)
        (folder / "empty.py").write_text("import torch  # noqa: F401\n")
        env = dict(os.environ, AMPTUI_RUNS_DIR=str(folder / "runs"), XDG_CONFIG_HOME=str(folder / "config"),
                   XDG_STATE_HOME=str(folder / "state"))
        commands = {
            "python empty.py": [PYTHON, "empty.py"],
            "amptui run --script empty.py": [AMPTUI, "run", "--script", "empty.py"],
            "amptui --help": [AMPTUI, "--help"],
        }
        for command in commands.values():  # warm-up, untimed
            timed(command, folder, env)
        load0 = os.getloadavg()[0]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(timed(command, folder, env))
        load1 = os.getloadavg()[0]
    wall = {name: statistics.median(t[0] for t in ts) for name, ts in times.items()}
    cpu = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
    bare = "python empty.py"
    print(f"\nmedian of {args.runs} (s), {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}\n")
    print("| command | wall s (median) | min | max | wall vs python | CPU s (median) | CPU vs python | goal |")
    print("|---|---|---|---|---|---|---|---|")
    for name, ts in times.items():
        walls = [t[0] for t in ts]
        diff, cpu_diff, goal = "", "", ""
        if name.startswith("amptui run"):
            diff, cpu_diff = f"{wall[name] - wall[bare]:+.2f}", f"{cpu[name] - cpu[bare]:+.2f}"
            goal = f"< +{SCRIPT_GOAL_S:g} s: {'PASS' if wall[name] - wall[bare] < SCRIPT_GOAL_S else 'MISS'}"
        elif name == "amptui --help":
            goal = f"< {HELP_GOAL_S:g} s: {'PASS' if wall[name] < HELP_GOAL_S else 'MISS'}"
        print(f"| `{name}` | {wall[name]:.2f} | {min(walls):.2f} | {max(walls):.2f} | {diff} | {cpu[name]:.2f} | "
              f"{cpu_diff} | {goal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
