"""Does measuring change what is measured? amptui's trainer, and the bare loop with an
amptui.Monitor added, against the hand-written recipe loop (bare_recipe.py), per optimizer step,
same sizes, same process conditions (each a fresh process, all interleaved), for fp32 and bf16 on
this machine's default device.

    python benchmarks/loop_overhead.py [--width 1024 --batch 256 --steps 400 --repeats 5]

"Same process conditions" includes the host allocator. On a CPU, glibc's malloc gives big freed
blocks back to the kernel, so every step faults in fresh pages, and how many depends on what the
process allocated before the loop: two processes running the same loop differ by several percent
(and up to 40% of a bf16 step is page faults on the machine in benchmarks/README.md). amptui's
trainer keeps freed memory for reuse on CPU runs (`run.reuse_host_memory`, trainer/host_memory.py),
so the bare loop and the Monitor run here with the same two settings, as environment variables
(MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_): the goal (<= 1.02) is judged on those. Two more
columns show the allocator's part: the bare loop with glibc's defaults, and the trainer with
`run.reuse_host_memory = false` (both on glibc's defaults, each with its own page-fault count).

Prints ms/step (best and median of --repeats) and the ratios. On a shared 2-core VM one run of the
same program varies by several percent, so the best of several runs is the figure to compare
(interference only ever adds time); the median is shown too. Both sides time the same steps:
after the first 10% (amptui's compare leaves those out as warm-up; the bare loop skips as many).

Process-to-process differences (where the heap and the operands land) stay larger than what the
Monitor adds, so it is also measured inside one process: bare_recipe.py --alternate times
interleaved windows of the same loop without and with Monitor.step; that table carries the
Monitor's verdict.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The trainer's host_memory.keep_freed_memory(), spelled as glibc's environment variables.
REUSE_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**64 - 1)}  # SIZE_MAX: never trim


def bare(dtype: str, args, monitor: bool = False, runs_dir: Path | None = None, reuse: bool = True) -> float:
    env = {k: v for k, v in os.environ.items() if k not in REUSE_ENV}
    env.update(REUSE_ENV if reuse else {})
    if runs_dir:
        env["AMPTUI_RUNS_DIR"] = str(runs_dir)
    out = subprocess.run([sys.executable, str(HERE / "bare_recipe.py"), "--dtype", dtype, "--width", str(args.width),
                          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.steps // 10)]
                         + (["--monitor"] if monitor else []), capture_output=True, text=True, check=True,
                         env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def monitor_alternating(dtype: str, args, runs_dir: Path, windows: int = 20, steps: int = 40) -> tuple[float, float, float]:
    """The Monitor measured inside one process: windows of the bare loop without and with
    Monitor.step, interleaved (bare_recipe.py --alternate). (bare ms, Monitor ms, median ratio)."""
    env = {k: v for k, v in os.environ.items() if k not in REUSE_ENV}
    env.update(REUSE_ENV, AMPTUI_RUNS_DIR=str(runs_dir))
    out = subprocess.run([sys.executable, str(HERE / "bare_recipe.py"), "--dtype", dtype, "--width", str(args.width),
                          "--batch", str(args.batch), "--steps", str(steps), "--warmup", str(steps),
                          "--alternate", str(windows)], capture_output=True, text=True, check=True, env=env).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["ms_per_step"], result["monitor_ms_per_step"], statistics.median(result["ratios"])


def amptui(dtype: str, args, runs_dir: Path, reuse: bool = True) -> float:
    from amptui.core.comparison import runsummary

    precision = ["--set", "amp.autocast=false"] if dtype == "fp32" else ["--set", "amp.dtype=bfloat16"]
    before = set(runs_dir.iterdir()) if runs_dir.exists() else set()
    env = {k: v for k, v in os.environ.items() if k not in REUSE_ENV}  # the trainer sets its own
    subprocess.run([sys.executable, "-m", "amptui", "run", "mlp-recipe", *precision,
                    "--set", f"model.width={args.width}", "--set", f"data.batch_size={args.batch}",
                    "--set", f"data.train_samples={args.batch * 50}", "--set", f"run.max_steps={args.steps}",
                    "--set", f"log.every={max(1, args.steps // 20)}", "--set", "log.checkpoint_every=0",
                    "--set", "run.epochs=1000", "--set", f"run.reuse_host_memory={str(reuse).lower()}",
                    "--runs-dir", str(runs_dir)],
                   capture_output=True, text=True, check=True, env=env)
    (run_dir,) = set(runs_dir.iterdir()) - before
    return runsummary.summarize(run_dir).steady_step_ms


COLUMNS = ("bare", "amptui", "Monitor", "bare, glibc defaults", "amptui, reuse off")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dtypes", default="fp32,bf16")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs_dir = Path(tmp) / "runs"
        for dtype in args.dtypes.split(","):
            times: dict[str, list[float]] = {c: [] for c in COLUMNS}
            for _ in range(args.repeats):  # interleaved, so drifting machine load hits all alike
                times["bare"].append(bare(dtype, args))
                times["amptui"].append(amptui(dtype, args, runs_dir))
                times["Monitor"].append(bare(dtype, args, monitor=True, runs_dir=runs_dir))
                times["bare, glibc defaults"].append(bare(dtype, args, reuse=False))
                times["amptui, reuse off"].append(amptui(dtype, args, runs_dir, reuse=False))
            rows.append((dtype, times, monitor_alternating(dtype, args, runs_dir)))
    print(f"recipe MLP width {args.width}, batch {args.batch}, {args.steps} steps, {args.repeats} runs each, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print("ms/step, best; median of the runs. 'bare' and 'Monitor' run with the trainer's allocator settings.")
    print(f"{'dtype':<6}" + "".join(f"{c:>22}" for c in COLUMNS))
    for dtype, times, _ in rows:
        print(f"{dtype:<6}" + "".join(f"{min(t):>13.2f}; {statistics.median(t):>6.2f}" for t in times.values()))
    print()
    print("ratios, best; median (goal: amptui/bare <= 1.02 at best of the runs; Monitor: see below)")
    print(f"{'dtype':<6}{'amptui/bare':>16}{'Monitor/bare':>16}{'reuse off/glibc bare':>24}{'glibc bare/bare':>18}"
          f"{'amptui':>8}")
    for dtype, times, _ in rows:
        best = {c: min(t) for c, t in times.items()}
        med = {c: statistics.median(t) for c, t in times.items()}

        def ratio(a: str, b: str, width: int) -> str:
            return f"{best[a] / best[b]:.3f}; {med[a] / med[b]:.3f}".rjust(width)

        verdict = "PASS" if best["amptui"] / best["bare"] <= 1.02 else "MISS"
        print(f"{dtype:<6}{ratio('amptui', 'bare', 16)}{ratio('Monitor', 'bare', 16)}"
              f"{ratio('amptui, reuse off', 'bare, glibc defaults', 24)}{ratio('bare, glibc defaults', 'bare', 18)}"
              f"{verdict:>8}")
    print()
    print("Monitor in one process: 20 interleaved pairs of 40-step windows without / with Monitor.step "
          "(what differs between processes cancels out)")
    print(f"{'dtype':<6}{'bare ms/step':>14}{'Monitor ms/step':>17}{'Monitor/bare (median of pairs)':>32}  goal <= 1.02")
    for dtype, _, (b, m, r) in rows:
        print(f"{dtype:<6}{b:>14.2f}{m:>17.2f}{r:>32.3f}  {'PASS' if r <= 1.02 else 'MISS'}")


if __name__ == "__main__":
    main()
