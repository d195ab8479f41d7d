"""Does measuring change what is measured? amptui's trainer, and the bare loop with an
amptui.Monitor added, against the hand-written recipe loop (bare_recipe.py), per optimizer step,
same sizes, same process conditions (each a fresh process, the three interleaved), for fp32 and
bf16 on this machine's default device.

    python benchmarks/loop_overhead.py [--width 1024 --batch 256 --steps 400 --repeats 5]

Prints ms/step (best and median of --repeats) and the ratios to the bare loop; the goal is
<= 1.02. On a shared 2-core VM one run of the same program varies by +-10%, so the best of
several runs is the figure to compare (interference only ever adds time); the median is shown too.
Both sides time the same steps: after the first 10% (amptui's compare leaves those out as
warm-up, and the bare loop is told to skip as many).
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


def bare(dtype: str, args, monitor: bool = False, runs_dir: Path | None = None) -> float:
    env = dict(os.environ, AMPTUI_RUNS_DIR=str(runs_dir)) if runs_dir else None
    out = subprocess.run([sys.executable, str(HERE / "bare_recipe.py"), "--dtype", dtype, "--width", str(args.width),
                          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.steps // 10)]
                         + (["--monitor"] if monitor else []), capture_output=True, text=True, check=True,
                         env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def amptui(dtype: str, args, runs_dir: Path) -> float:
    from amptui.core import compare

    precision = ["--set", "amp.autocast=false"] if dtype == "fp32" else ["--set", "amp.dtype=bfloat16"]
    before = set(runs_dir.iterdir()) if runs_dir.exists() else set()
    subprocess.run([sys.executable, "-m", "amptui", "run", "mlp-recipe", *precision,
                    "--set", f"model.width={args.width}", "--set", f"data.batch_size={args.batch}",
                    "--set", f"data.train_samples={args.batch * 50}", "--set", f"run.max_steps={args.steps}",
                    "--set", f"log.every={max(1, args.steps // 20)}", "--set", "log.checkpoint_every=0",
                    "--set", "run.epochs=1000", "--runs-dir", str(runs_dir)],
                   capture_output=True, text=True, check=True)
    (run_dir,) = set(runs_dir.iterdir()) - before
    return compare.summarize(run_dir).steady_step_ms


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
            b, a, m = [], [], []
            for _ in range(args.repeats):  # interleaved, so drifting machine load hits all alike
                b.append(bare(dtype, args))
                a.append(amptui(dtype, args, runs_dir))
                m.append(bare(dtype, args, monitor=True, runs_dir=runs_dir))
            rows.append((dtype, b, a, m))
    print(f"recipe MLP width {args.width}, batch {args.batch}, {args.steps} steps, {args.repeats} runs each, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"{'dtype':<6} {'bare ms/step':>16} {'amptui ms/step':>16} {'Monitor ms/step':>16} "
          f"{'amptui/bare':>12} {'Monitor/bare':>13}  (best; median)")
    for dtype, b, a, m in rows:
        best = [min(b), min(a), min(m)]
        med = [statistics.median(b), statistics.median(a), statistics.median(m)]
        cells = [f"{x:.2f}; {y:.2f}" for x, y in zip(best, med)]
        ratios = [f"{best[i] / best[0]:.3f}; {med[i] / med[0]:.3f}" for i in (1, 2)]
        verdict = "PASS" if max(best[1], best[2]) / best[0] <= 1.02 else "MISS"
        print(f"{dtype:<6} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {ratios[0]:>12} {ratios[1]:>13}  {verdict}")


if __name__ == "__main__":
    main()
