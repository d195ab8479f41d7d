"""What precision-hygiene sampling (`numerics.hygiene_every`, on by default at 50) costs, in one
process: a hand-written loop of the small GPT (amptui/trainer/gpt.py) recorded by amptui.Monitor
with hygiene sampling every --every steps, against the same Monitor with it off, their steps
alternating one by one (two models, same seed, same batches: a busy machine's slow spells hit both).
Per-step times are kept by kind: off, on but not sampled (no hook registered: one integer
comparison), on and sampled.

    python benchmarks/hygiene_cost.py [--every 50 --windows 6 --precision mixed|mixed+scaler|pure]
    python benchmarks/hygiene_cost.py --every 1 --steps 40 --at 50    # every step sampled

A sampled step is one in `--every`, so its extra time is measured on few steps; `--every 1` samples
every step, so the extra time of a sample (sampled minus off, medians over `--steps`) is measured on
many, and the cost at `--at` is that extra divided by `--at`, against the off steps.

--precision: `mixed` (float32 weights, bf16 autocast: the linears' dtype hooks and the one-time
metadata look), `mixed+scaler` (and a GradScaler: the gradient-norm hooks and the optimizer's
pre-hook), `pure` (bf16 weights, no autocast: each 16-bit parameter's probe values copied before
and compared after the step, the lost-update finding's work; lr 1e-2, so the GPT's updates move its
bfloat16 weights and nothing is said: a finding said stops that finding's sampling).

Goal (issue 53): on at --every 50 <= 3% per step: (a sampled step's extra time) / every, against
the unsampled steps. Medians over windows. Prints a table and the ratio; exits 0 either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def measure(args) -> tuple[dict[str, list[float]], list[str]]:
    import torch

    import amptui
    from amptui.trainer.gpt import GPT

    pure = args.precision == "pure"
    scaled = args.precision == "mixed+scaler"
    x = torch.randint(0, 256, (args.batch, 32))
    y = torch.randint(0, 256, (args.batch, 32))
    loss_fn = torch.nn.CrossEntropyLoss()

    def loop(every: int):
        torch.manual_seed(0)
        model = GPT(n_layer=args.layers, n_head=2, n_embd=args.width, block_size=32)
        if pure:
            model = model.to(torch.bfloat16)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2 if pure else 1e-3)
        scaler = torch.amp.GradScaler("cpu", enabled=scaled)
        config = {"numerics": {"hygiene_every": every}, "amp": {"dtype": "bfloat16", "autocast": not pure}}
        mon = amptui.Monitor(f"hygiene-{every}", optimizer=opt, model=model, scaler=scaler if scaled else None,
                             config=config, log_every=args.every)

        def step() -> float:
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not pure):
                loss = loss_fn(model(x).float().view(-1, 256), y.view(-1))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss)
            opt.zero_grad(set_to_none=True)
            return time.perf_counter() - t0
        return mon, step

    off_mon, off_step = loop(0)
    on_mon, on_step = loop(args.every)
    times: dict[str, list[float]] = {"off": [], "not sampled": [], "sampled": []}
    said: list[str] = []
    with off_mon, on_mon:
        warmup = args.every if args.every > 1 else 5
        for i in range(warmup + (args.steps if args.every == 1 else args.windows * args.every)):
            sampled = (on_mon.steps + 1) % args.every == 0
            off, on = off_step(), on_step()
            sampler = on_mon.recorder.hygiene
            if args.keep_sampling and sampler is not None:  # outside the clock: every finding keeps sampling
                said.extend(sampler.said)
                sampler.said.clear()
            if i < warmup:
                continue
            times["off"].append(off)
            times["sampled" if sampled else "not sampled"].append(on)
    from amptui.core import hygiene
    from amptui.core.stream.events import read_events
    from amptui.core.stream.records import WarningRecord

    said += [str(r.code) for r in read_events(on_mon.run_dir / "events.jsonl")
             if isinstance(r, WarningRecord) and r.code in hygiene.CODES]
    return times, sorted(set(said))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=50, help="sampling interval measured (optimizer steps)")
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--steps", type=int, default=40, help="--every 1: steps measured")
    parser.add_argument("--at", type=int, default=50, help="--every 1: the sampling interval judged")
    parser.add_argument("--keep-sampling", action=argparse.BooleanOptionalAction, default=True,
                        help="forget each finding once said, so its sampling goes on (the most work a sample does)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--precision", choices=("mixed", "mixed+scaler", "pure"), default="mixed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as runs:
        os.environ["AMPTUI_RUNS_DIR"] = runs
        times, said = measure(args)
    ms = {k: 1000 * statistics.median(v) for k, v in times.items() if v}
    measured = f"{args.steps} steps, every one sampled" if args.every == 1 else \
        f"{args.windows} windows of {args.every} steps"
    print(f"GPT n_layer={args.layers} n_embd={args.width} batch={args.batch}x32, {args.precision}, {measured}, "
          f"amptui.Monitor with hygiene off and on alternating (one process); findings said: {said or 'none'} "
          "(with --keep-sampling each is forgotten once said, so every sample does all its work)")
    print(f"{'step':<34}{'median ms':>10}{'steps':>8}")
    for kind, label in (("off", "hygiene off"), ("not sampled", "hygiene on, not sampled"),
                        ("sampled", "hygiene on, sampled")):
        if kind in ms:
            print(f"{label:<34}{ms[kind]:>10.2f}{len(times[kind]):>8}")
    if args.every == 1:
        extra = ms["sampled"] - ms["off"]
        on = extra / args.at / ms["off"]
        print(f"a sample's extra time: {extra:+.2f} ms ({ms['sampled'] / ms['off']:.3f}x a step with hygiene off); "
              f"sampling every {args.at}: {100 * on:+.3f}% per step: {'PASS' if on <= 0.03 else 'MISS'} (goal <= 3%)")
        return 0
    between = ms["not sampled"] / ms["off"] - 1
    on = (ms["sampled"] - ms["not sampled"]) / args.every / ms["not sampled"]
    print(f"between samples: {100 * between:+.1f}% against off (no hook registered; noise)")
    print(f"sampling every {args.every}: {100 * on:+.2f}% per step "
          f"(a sampled step {ms['sampled'] / ms['not sampled']:.2f}x an unsampled one): "
          f"{'PASS' if on <= 0.03 else 'MISS'} (goal <= 3%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
