"""What per-layer range sampling ([numerics]) costs, in one process: a hand-written loop of the
small GPT (amptui/trainer/gpt.py), its steps alternating one by one between bare and with
amptui.Monitor sampling every --every steps (no bare step runs right before a sampled one, whose
hooks are registered already). Per-step times are kept by kind: bare, Monitor
step not sampled (exactly what sampling off runs: no hook is registered), Monitor step sampled.

    python benchmarks/numerics_cost.py [--every 50 --windows 6 --dtype fp32] [--float8 rowwise]

--float8 converts the GPT's linears with torchao first (amp.float8's rules; bf16 autocast): a
sampled step then also measures each float8 linear (a float32 GEMM for its SQNR, the casts'
underflow counts).

Goals (issue 21): off = 0% (no hook at all; the unsampled Monitor steps against the bare ones show
the Monitor's own cost, which benchmarks/loop_overhead.py judges), on at --every <= 3% per step:
(one sampled step's extra time) / every, against the unsampled steps. Medians over windows, so a
busy machine's stray slow steps count less. Prints a table and the ratios; exits 0 either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def measure(args) -> dict[str, list[float]]:
    import torch

    import amptui
    from amptui.trainer.gpt import GPT

    torch.manual_seed(0)
    model = GPT(n_layer=args.layers, n_head=2, n_embd=args.width, block_size=32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (args.batch, 32))
    y = torch.randint(0, 256, (args.batch, 32))
    bf16 = args.dtype == "bf16" or args.float8 != "off"
    config: dict = {"numerics": {"every": args.every, "depth": 2}}
    if args.float8 != "off":
        from amptui.core.config import values as cfgmod
        from amptui.core.config.precision import Precision
        from amptui.trainer.modes.float8 import convert, summary_words

        cfg = cfgmod.build_config({}, {"amp.float8": args.float8})
        print(summary_words(convert(model, Precision.from_config(cfg, "cpu"), cfg, torch.device("cpu"))))
    if bf16:
        config["amp"] = {"dtype": "bfloat16", "grad_scaler": False}
    loss_fn = torch.nn.CrossEntropyLoss()
    times: dict[str, list[float]] = {"bare": [], "not sampled": [], "sampled": []}

    def step(mon) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x).float().view(-1, 256), y.view(-1))
        loss.backward()
        opt.step()
        if mon is not None:
            mon.step(loss)
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    with amptui.Monitor("numerics-cost", optimizer=opt, model=model, config=config, log_every=args.every) as mon:
        for i in range((args.windows + 1) * args.every):  # the first window is warm-up
            # bare and Monitor steps alternate one by one (a busy machine's slow spells hit both);
            # no bare step right before a sampled one, whose hooks are registered already
            sampled_next = (mon.steps + 1) % args.every == 0
            bare = None if sampled_next else step(None)
            took = step(mon)
            if i < args.every:
                continue
            if bare is not None:
                times["bare"].append(bare)
            times["sampled" if sampled_next else "not sampled"].append(took)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=50, help="sampling interval measured (optimizer steps)")
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--float8", choices=("off", "tensorwise", "rowwise", "mxfp8"), default="off",
                        help="convert the linears to torchao's float8 first (bf16 autocast; needs the fp8 extra)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as runs:
        os.environ["AMPTUI_RUNS_DIR"] = runs
        times = measure(args)
    ms = {k: 1000 * statistics.median(v) for k, v in times.items()}
    precision = args.dtype if args.float8 == "off" else f"bf16 + float8 {args.float8}"
    print(f"GPT n_layer={args.layers} n_embd={args.width} batch={args.batch}x32, {precision}, {args.windows} windows "
          f"of {args.every} steps, bare and amptui.Monitor sampling every {args.every} alternating (one process)")
    print(f"{'step':<34}{'median ms':>10}{'steps':>8}")
    for kind, label in (("bare", "hand loop"), ("not sampled", "Monitor, not sampled (= off)"),
                        ("sampled", "Monitor, sampled")):
        print(f"{label:<34}{ms[kind]:>10.2f}{len(times[kind]):>8}")
    off = ms["not sampled"] / ms["bare"] - 1
    on = (ms["sampled"] - ms["not sampled"]) / args.every / ms["not sampled"]
    print(f"sampling off: no hook registered (0% by construction); the Monitor itself: {100 * off:+.1f}% "
          "(its goal is judged by loop_overhead.py)")
    print(f"sampling every {args.every}: {100 * on:+.2f}% per step "
          f"(a sampled step {ms['sampled'] / ms['not sampled']:.2f}x an unsampled one): "
          f"{'PASS' if on <= 0.03 else 'MISS'} (goal <= 3%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
