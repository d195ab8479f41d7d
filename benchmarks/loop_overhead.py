"""Does measuring change what is measured? amptui's trainer against the hand-written recipe loop
(bare_recipe.py), per optimizer step, same sizes, same process conditions (each a fresh process,
interleaved, median of --repeats), for fp32 and bf16 on this machine's default device.

    python benchmarks/loop_overhead.py [--width 1024 --batch 256 --steps 200 --repeats 3]

Prints a table of ms/step and the amptui/bare ratio per dtype; the goal is <= 1.02.
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


def bare(dtype: str, args) -> float:
    out = subprocess.run([sys.executable, str(HERE / "bare_recipe.py"), "--dtype", dtype, "--width", str(args.width),
                          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.steps // 10)],
                         capture_output=True, text=True, check=True).stdout
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
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtypes", default="fp32,bf16")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs_dir = Path(tmp) / "runs"
        for dtype in args.dtypes.split(","):
            b, a = [], []
            for _ in range(args.repeats):  # interleaved, so drifting machine load hits both alike
                b.append(bare(dtype, args))
                a.append(amptui(dtype, args, runs_dir))
            rows.append((dtype, statistics.median(b), statistics.median(a)))
    print(f"recipe MLP width {args.width}, batch {args.batch}, {args.steps} steps, median of {args.repeats}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'dtype':<6} {'bare ms/step':>13} {'amptui ms/step':>15} {'amptui/bare':>12}")
    for dtype, b, a in rows:
        print(f"{dtype:<6} {b:>13.2f} {a:>15.2f} {a / b:>12.3f}")


if __name__ == "__main__":
    main()
