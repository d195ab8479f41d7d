"""The home screen's memory over time (issue 24, finding 9): flat on a busy runs folder.

    python benchmarks/home_memory.py [--minutes 2] [--runs 20] [--live 5] [--every 30]
    python benchmarks/home_memory.py --trace --minutes 3   # in process, with tracemalloc

Builds a temp runs folder of `--runs` runs (copies of the finished fixture runs in tests/fixtures),
`--live` of them with a live writer (a process that holds the run's lock and appends a step record
every 50 ms, as a trainer does), then runs the real dashboard (`python -m amptui --runs-dir ...`)
in a pseudo-terminal of 120x40 and prints its RSS every `--every` seconds. The output is drained
and thrown away (the terminal costs nothing); the one query Textual asks is answered.

Goal (issue 24): after its first minute, a home screen open 30 minutes on 20 runs grows < 5 MB.
The figure is RSS at the end less RSS at one minute; the table also shows the CPU the dashboard
used per sampling interval. Exits 0 whether or not the goal is met (PASS/MISS line).

--trace: instead of a separate process, a headless Textual pilot in this process, and at each
sample the top tracemalloc differences against the one-minute snapshot (where growth lives).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "runs"
GOAL_MB = 5.0
SYNC_QUERY, SYNC_REPLY = b"\x1b[?2026$p", b"\x1b[?2026;2$y"


def make_runs(root: Path, count: int) -> list[Path]:
    sources = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    runs = []
    for i in range(count):
        source = sources[i % len(sources)]
        target = root / f"20990101-{i:06d}-{source.name.split('-', 2)[2]}"
        shutil.copytree(source, target)
        (target / "lock").touch()
        runs.append(target)
    return runs


def writer(run_dir: Path) -> None:
    """A stand-in trainer: holds the run's lock and appends a step record every 50 ms."""
    from amptui.core.run import runlock
    from amptui.core.stream.events import EventWriter

    lock = runlock.acquire(run_dir)
    lock.describe()
    (run_dir / "run.json").write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename,
                                                  "command": ["bench-writer"], "launched": time.time()}))
    parent = os.getppid()
    with EventWriter(run_dir / "events.jsonl") as events:
        step = 0
        while os.getppid() == parent:  # the benchmark is gone (killed): so is its writer
            step += 1
            events.emit("step", step=step, epoch=0, loss=1.0 / step, lr=1e-3, scale=65536.0, skipped=0,
                        skipped_total=0, samples=32, dt=0.05, mem={"rss": 1 << 28})
            time.sleep(0.05)


def start_writers(runs: list[Path], live: int) -> list[subprocess.Popen]:
    procs = []
    for run_dir in runs[:live]:
        procs.append(subprocess.Popen([sys.executable, __file__, "--writer", str(run_dir)]))
    return procs


class Pty:
    """The dashboard in a pseudo-terminal; its output drained in a thread and dropped."""

    def __init__(self, argv: list[str], cols: int = 120, rows: int = 40):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))

        def setup() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     preexec_fn=setup, close_fds=True)
        os.close(slave)
        self.bytes = 0
        self.tail = b""
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        answered = False
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            self.tail = (self.tail + data)[-4096:]
            if not answered and SYNC_QUERY in self.tail:
                answered = True
                os.write(self.master, SYNC_REPLY)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.master)


def sample_process(root: Path, seconds: float, every: float) -> list[tuple[float, float, float]]:
    """(elapsed s, RSS MB, % of a core since the last sample) of the real dashboard."""
    import psutil

    term = Pty([sys.executable, "-m", "amptui", "--runs-dir", str(root)])
    proc = psutil.Process(term.proc.pid)
    rows = []
    t0 = time.monotonic()
    cpu0 = sum(proc.cpu_times()[:2])
    try:
        while True:
            elapsed = time.monotonic() - t0
            if term.proc.poll() is not None:
                raise SystemExit(f"the dashboard exited ({term.proc.returncode}): {term.tail[-500:]!r}")
            cpu = sum(proc.cpu_times()[:2])
            rows.append((elapsed, proc.memory_info().rss / 2**20,
                         100 * (cpu - cpu0) / max(elapsed - (rows[-1][0] if rows else 0), 1e-9)))
            cpu0 = cpu
            print(f"  {elapsed:7.0f} s  {rows[-1][1]:7.1f} MB  {rows[-1][2]:5.1f}% cpu", flush=True)
            if elapsed >= seconds:
                return rows
            time.sleep(min(every, seconds - elapsed + 0.01))
    finally:
        term.close()


def sample_in_process(root: Path, seconds: float, every: float) -> list[tuple[float, float, float]]:
    """The same in a headless pilot in this process, with tracemalloc's top growth at each sample."""
    import tracemalloc

    import psutil

    from amptui.dashboard.app import make_app

    tracemalloc.start(12)
    proc = psutil.Process()
    rows: list[tuple[float, float, float]] = []

    async def go() -> None:
        app = make_app(root)
        async with app.run_test(size=(120, 40)) as pilot:
            t0 = time.monotonic()
            base = None
            while True:
                elapsed = time.monotonic() - t0
                rows.append((elapsed, proc.memory_info().rss / 2**20, 0.0))
                traced = tracemalloc.get_traced_memory()[0] / 2**20
                print(f"  {elapsed:7.0f} s  rss {rows[-1][1]:7.1f} MB  traced {traced:7.1f} MB", flush=True)
                snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
                if base is None and elapsed >= 60:
                    base = snap
                elif base is not None:
                    for stat in snap.compare_to(base, "traceback")[:3]:
                        print(f"    {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
                        for line in stat.traceback.format()[-12:]:
                            print("      " + line)
                if elapsed >= seconds:
                    return
                await pilot.pause(min(every, seconds - elapsed + 0.01))

    asyncio.run(go())
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="how long the home screen stays open (2)")
    parser.add_argument("--runs", type=int, default=20, help="runs in the folder (20)")
    parser.add_argument("--live", type=int, default=5, help="of which with a live writer (5)")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples (30)")
    parser.add_argument("--trace", action="store_true", help="in process, with tracemalloc's growth")
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(Path(args.writer))
        return 0
    import amptui

    print(f"amptui from {Path(amptui.__file__).parent}; {args.runs} runs, {args.live} live, "
          f"{args.minutes:g} min, a sample every {args.every:g} s")
    with tempfile.TemporaryDirectory(prefix="amptui-home-mem-") as tmp:
        root = Path(tmp) / "runs"
        runs = make_runs(root, args.runs)
        writers = start_writers(runs, args.live)
        try:
            sample = sample_in_process if args.trace else sample_process
            rows = sample(root, args.minutes * 60, args.every)
        finally:
            for proc in writers:
                proc.terminate()
                proc.wait()
    after_first = [r for r in rows if r[0] >= 60]
    print("\n| elapsed s | RSS MB | % of a core |\n|---|---|---|")
    for elapsed, rss, cpu in rows:
        print(f"| {elapsed:.0f} | {rss:.1f} | {cpu:.1f} |")
    if len(after_first) >= 2:
        growth = after_first[-1][1] - after_first[0][1]
        minutes = (after_first[-1][0] - after_first[0][0]) / 60
        verdict = "PASS" if growth < GOAL_MB else "MISS"
        print(f"\ngrowth after the first minute: {growth:+.1f} MB over {minutes:.1f} min "
              f"({growth / max(minutes, 1e-9):+.2f} MB/min); goal < {GOAL_MB:g} MB over 30 min: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
