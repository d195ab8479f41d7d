"""What per-layer range sampling ([numerics]) costs: a hand-written loop of the small GPT
(amptui/trainer/gpt.py) timed bare, with amptui.Monitor and sampling off, and with the Monitor
sampling every --every steps, each in a fresh process, all interleaved, best of --repeats.

    python benchmarks/numerics_cost.py [--steps 200 --every 50 --repeats 5 --dtype bf16]

Goals (issue 21): sampling off costs nothing against the Monitor without it (the hooks are
registered only for a sampled step: off registers none), and sampling on at --every adds <= 3%
per step. Prints ms/step (best and median) and the ratios; exits 0 either way.
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

MODES = ("bare", "monitor", "sampling")


def worker(mode: str, args) -> None:
    import torch

    import amptui
    from amptui.trainer.gpt import GPT

    torch.manual_seed(0)
    model = GPT(n_layer=args.layers, n_head=2, n_embd=args.width, block_size=32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (args.batch, 32))
    y = torch.randint(0, 256, (args.batch, 32))
    dtype = torch.bfloat16 if args.dtype == "bf16" else None
    config = {"numerics": {"every": args.every if mode == "sampling" else 0, "depth": 2}}
    if dtype is not None:
        config["amp"] = {"dtype": "bfloat16", "grad_scaler": False}
    mon = amptui.Monitor(f"numerics-cost-{mode}", optimizer=opt, model=model, config=config,
                         log_every=10) if mode != "bare" else None
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = loss_fn(model(x).float().view(-1, 256), y.view(-1))
        loss.backward()
        opt.step()
        if mon is not None:
            mon.step(loss)
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    if mon is not None:
        mon.close()
    warm = args.steps // 10
    print(json.dumps({"ms_per_step": 1000 * sum(times[warm:]) / len(times[warm:])}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=50, help="sampling interval measured (optimizer steps)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args)
        return 0
    results: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as runs:
        env = {**os.environ, "AMPTUI_RUNS_DIR": runs}
        passed = [a for a in sys.argv[1:] if not a.startswith("--worker")]
        for _ in range(args.repeats):
            for mode in MODES:
                out = subprocess.run([sys.executable, __file__, *passed, "--worker", mode], capture_output=True,
                                     text=True, check=True, env=env).stdout
                results[mode].append(json.loads(out.strip().splitlines()[-1])["ms_per_step"])
    best = {m: min(v) for m, v in results.items()}
    print(f"GPT n_layer={args.layers} n_embd={args.width} batch={args.batch}x32, {args.dtype}, {args.steps} steps, "
          f"sampling every {args.every}, best of {args.repeats} processes per mode (interleaved)")
    print(f"{'mode':<24}{'best ms/step':>14}{'median':>10}{'vs bare':>10}{'vs monitor':>12}")
    for mode, label in zip(MODES, ("hand loop", "Monitor, sampling off", f"Monitor, every {args.every}"),
                           strict=True):
        print(f"{label:<24}{best[mode]:>14.2f}{statistics.median(results[mode]):>10.2f}"
              f"{best[mode] / best['bare']:>10.3f}{best[mode] / best['monitor']:>12.3f}")
    on = best["sampling"] / best["monitor"] - 1
    print(f"sampling on costs {100 * on:+.1f}% per step against sampling off: {'PASS' if on <= 0.03 else 'MISS'} "
          f"(goal <= 3%); sampling off registers no hook at all (0% by construction)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
