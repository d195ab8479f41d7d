"""Which details of a hand-written loop move a CPU's bf16 speed-up, against `amptui ab` (issue 43).

    python benchmarks/loop_details.py                        # width 1024, batch 128, 400 steps, 3 rounds
    python benchmarks/loop_details.py --batch 256 --rounds 5

The PyTorch AMP recipe's loop (bare_recipe.py: 3 x Linear(width), SGD, MSE, fixed batches) is timed
in fp32 and bf16 under several loop details, each (detail, dtype) in a fresh process, so each has
its own heap, as each `amptui ab` variant does:

- "amptui's choices": what the trainer does (fused SGD, zero_grad(set_to_none=True), the disabled
  GradScaler's calls, freed host memory kept for reuse, amptui/trainer/host_memory.py);
- "recipe as written": torch's default foreach SGD and the system allocator's defaults;
- the recipe with one detail changed: fused SGD, host memory kept, set_to_none=False, no GradScaler
  calls, the for-loop SGD.

and `amptui ab mlp-recipe --variants fp32,bf16` at the same sizes (its speed-up as `ab` prints it).
Rounds run the rows in turn (row 1 fp32, row 1 bf16, row 2 fp32, ...; then again), so a slow drift
of the machine reaches every row alike. Prints a table of each row's median ms/step per dtype and
its speed-up (median of fp32 over median of bf16), with the spread of the rounds' speed-ups, and
whether `ab`'s speed-up is within 5% of the "amptui's choices" loop's. Needs a quiet machine: the
load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_ab import Model, amptui_ab  # noqa: E402  (the A/B as gpu_ab.py runs it)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

AMPTUI = ["--optimizer", "fused", "--reuse-host-memory"]
ROWS = {  # name: bare_recipe.py flags
    "amptui's choices": AMPTUI,
    "recipe as written": [],
    "recipe + fused SGD": ["--optimizer", "fused"],
    "recipe + host memory kept": ["--reuse-host-memory"],
    "recipe + set_to_none=False": ["--keep-grads"],
    "recipe + no GradScaler calls": ["--no-scaler-calls"],
    "recipe + for-loop SGD": ["--optimizer", "forloop"],
}
GOAL = 0.05


def hand_ms(flags: list[str], dtype: str, args) -> float:
    cmd = [sys.executable, str(HERE / "bare_recipe.py"), "--device", "cpu", "--dtype", dtype,
           "--width", str(args.width), "--batch", str(args.batch), "--steps", str(args.steps),
           "--warmup", str(args.steps // 10), *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def ab_speedup(args, runs_dir: Path) -> float:
    model = Model("mlp", "mlp-recipe", {"model.width": args.width, "data.batch_size": args.batch}, args.steps)
    found = amptui_ab(model, ["fp32", "bf16"], "cpu", runs_dir)
    return found["bf16"][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 150)
    import torch

    console.print(f"loop_details on CPU ({os.cpu_count()} cores), torch {torch.__version__}, "
                  f"load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                  f"width {args.width}, batch {args.batch}, {args.steps} steps, {args.rounds} rounds")
    ms: dict[tuple[str, str], list[float]] = {}
    ab: list[float] = []
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="amptui-loop-details-") as tmp:
        for round_ in range(args.rounds):
            for name, flags in ROWS.items():
                for dtype in ("fp32", "bf16"):
                    ms.setdefault((name, dtype), []).append(hand_ms(flags, dtype, args))
            ab.append(ab_speedup(args, Path(tmp) / f"round{round_}"))
    table = Table(title="bf16 speed-up of the recipe's loop on this CPU, per loop detail")
    for col in ("loop", "fp32 ms/step", "bf16 ms/step", "speed-up", "rounds' speed-ups"):
        table.add_column(col, justify="left" if col == "loop" else "right")
    speedups = {}
    for name in ROWS:
        f32, b16 = ms[(name, "fp32")], ms[(name, "bf16")]
        speedups[name] = statistics.median(f32) / statistics.median(b16)
        each = ", ".join(f"{a / b:.2f}" for a, b in zip(f32, b16))
        table.add_row(name, f"{statistics.median(f32):.2f}", f"{statistics.median(b16):.2f}",
                      f"{speedups[name]:.2f}x", each)
    ab_median = statistics.median(ab)
    table.add_row("amptui ab", "", "", f"{ab_median:.2f}x", ", ".join(f"{s:.2f}" for s in ab))
    console.print(table)
    ratio = ab_median / speedups["amptui's choices"]
    verdict = "PASS" if abs(ratio - 1) <= GOAL else "MISS"
    console.print(f"ab / amptui's-choices loop: {ratio:.3f} ({verdict}, goal within {GOAL:.0%}); "
                  f"ab / recipe as written: {ab_median / speedups['recipe as written']:.3f}")
    console.print(f"load average {os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
