"""What the script hooks cost: the PyTorch AMP recipe's loop (depth x Linear(width) + ReLU, SGD,
MSELoss, autocast, GradScaler with unscale_ + clip_grad_norm_, as the recipe writes it) timed bare
and under `amptui run --script`'s hooks, in one process, in interleaved windows (same heap, same
operands: only the hooks differ).

    python benchmarks/script_hooks.py [--width 512 --batch 128 --steps 40 --windows 10 --variants fp32,bf16]
    python benchmarks/script_hooks.py --clock cpu      # a busy shared machine: CPU time, one thread
    python benchmarks/script_hooks.py --profile 3000   # the hooks' fixed cost per step, and where it goes

Each hooked window installs the hooks for a fresh run folder (as the bootstrap does), runs
log.every + 2 untimed steps (the first writes the start record; the first record window counts
non-finite gradients per parameter, as the Monitor's does), times --steps steps (step records
included), then ends the session (untimed): the steady state a script's step pays. Prints a table (best and median ms/step) and
the ratio hooked / bare (median of the window pairs' ratios); the goal is <= 1.02 on a CPU.

--profile N: a toy loop (width 16, batch 4: the step is almost all Python) bare and hooked, in
CPU microseconds per step (one thread; the difference is the hooks' fixed cost per step), then N
hooked steps under cProfile, the functions that took the most time first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn


def make_loop(width: int, depth: int, batch: int, variant: str, device: torch.device):
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    net = nn.Sequential(*layers, nn.Linear(width, width)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[variant.split("+")[0]]
    use_amp = dtype != torch.float32
    scaler = torch.amp.GradScaler(device.type, enabled=variant.endswith("+scaler"))
    data = [(torch.randn(batch, width, device=device), torch.randn(batch, width, device=device)) for _ in range(8)]
    loss_fn = nn.MSELoss()

    def steps(n: int) -> None:
        for i in range(n):
            x, y = data[i % len(data)]
            with torch.autocast(device_type=device.type, dtype=dtype, enabled=use_amp):
                loss = loss_fn(net(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
    return steps


CLOCK = time.perf_counter


def timed(steps, n: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = CLOCK()
    steps(n)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1000 * (CLOCK() - t0) / n


def hooked_window(steps, n: int, device: torch.device, root: Path, log_every: int) -> float:
    from amptui.jobs import launch
    from amptui.telemetry import scripthooks

    run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": log_every}, root)
    session = scripthooks.install(run_dir)
    try:
        steps(log_every + 2)  # the first step writes the start record; the first window traces overflows
        return timed(steps, n, device)
    finally:
        session.end("completed")


def fixed_cost(variants: list[str], n: int, log_every: int) -> None:
    """The hooks' fixed cost per step on a toy loop, and a cProfile of N hooked steps."""
    import cProfile
    import pstats

    from amptui.jobs import launch
    from amptui.telemetry import scripthooks

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            steps = make_loop(16, 3, 4, variant, cpu)
            steps(20)

            def per_step(count: int) -> float:
                t0 = time.process_time()
                steps(count)
                return 1e6 * (time.process_time() - t0) / count
            bare, hooked = [], []
            for _ in range(5):
                bare.append(per_step(500))
                run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": log_every}, Path(tmp))
                session = scripthooks.install(run_dir)
                steps(log_every + 2)
                hooked.append(per_step(500))
                session.end("completed")
            b, h = statistics.median(bare), statistics.median(hooked)
            print(f"{variant}: bare {b:.1f} us/step, hooked {h:.1f} us/step: the hooks' fixed cost {h - b:.1f} us/step "
                  f"(CPU time, a record every {log_every} steps)")
        run_dir, _ = launch.create_run(None, {"run.script": __file__, "log.every": log_every}, Path(tmp))
        session = scripthooks.install(run_dir)
        steps(log_every + 2)
        profile = cProfile.Profile()
        profile.enable()
        steps(n)
        profile.disable()
        session.end("completed")
    pstats.Stats(profile).sort_stats("tottime").print_stats(30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=40, help="steps per timed window")
    p.add_argument("--windows", type=int, default=10, help="window pairs (bare, hooked), interleaved")
    p.add_argument("--variants", default="fp32,bf16", help="fp32, bf16, fp16, each optionally +scaler")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--log-every", type=int, default=10, help="the run's log.every (a step record per N steps)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: this process's CPU seconds with torch on one thread (a busy shared machine's "
                        "wall clock measures the neighbours; the work the hooks add shows in CPU time)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="the hooks' fixed cost per step on a toy loop, then N hooked steps under cProfile")
    args = p.parse_args()
    if args.profile:
        fixed_cost(args.variants.split(","), args.profile, args.log_every)
        return
    device = torch.device(args.device)
    global CLOCK
    if args.clock == "cpu":
        torch.set_num_threads(1)
        CLOCK = time.process_time
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants.split(","):
            steps = make_loop(args.width, args.depth, args.batch, variant, device)
            steps(5)  # warm-up
            bare, hooked = [], []
            for w in range(args.windows):
                bare.append(timed(steps, args.steps, device))
                hooked.append(hooked_window(steps, args.steps, device, Path(tmp), args.log_every))
            ratios = [h / b for b, h in zip(bare, hooked, strict=True)]
            rows.append((variant, min(bare), statistics.median(bare), min(hooked), statistics.median(hooked),
                         statistics.median(ratios)))
    print(f"AMP recipe loop, width {args.width} x {args.depth}, batch {args.batch}, {args.device}, "
          f"torch {torch.__version__}; {args.windows} interleaved window pairs of {args.steps} steps; "
          f"{args.clock} clock")
    print(f"{'variant':<12} {'bare best':>10} {'bare med':>10} {'hooks best':>11} {'hooks med':>10} {'ratio':>7}")
    for variant, bb, bm, hb, hm, ratio in rows:
        print(f"{variant:<12} {bb:>9.2f}ms {bm:>9.2f}ms {hb:>10.2f}ms {hm:>9.2f}ms {ratio:>7.3f}")
    print("ratio: median over window pairs of hooked / bare ms per step (goal <= 1.02)")


if __name__ == "__main__":
    main()
