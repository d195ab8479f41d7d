"""What `amptui plan`'s probe costs (issue 44), in one process: the small GPT (amptui/trainer/gpt.py)
trained by a hand loop whose steps rotate between bare (no probe at all), probed but not sampled
(the probe's prepare() ran and found the step not due: what a plan run's other steps run) and
sampled (every linear's GEMM re-run in float32, bf16, fp16 and three torchao float8 recipes after
the optimizer step). Medians of each kind; the hooks are counted on every step.

    python benchmarks/plan_cost.py [--width 64 --layers 2 --batch 16 --rounds 8]

Goals: between samples 0 cost (no hook registered on a step that is not sampled; its time within
the bare steps' noise); a sampled step's extra time said in ms and as multiples of a bare step (it
is paid on 4 steps of a plan's run; CPUs emulate float8). Prints a table; exits 0 either way.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()

    import torch

    import amptui
    from amptui.telemetry.plan_probe import PlanProbe
    from amptui.trainer.gpt import GPT

    torch.manual_seed(0)
    model = GPT(n_layer=args.layers, n_head=2, n_embd=args.width, block_size=32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (args.batch, 32))
    y = torch.randint(0, 256, (args.batch, 32))
    loss_fn = torch.nn.CrossEntropyLoss()
    probe = PlanProbe(model, every=3)  # steps 3, 6, ... sampled

    def hooks() -> int:
        return sum(len(m._forward_hooks) for _, m in probe.layers)

    def step(n: int | None) -> tuple[float, int]:
        t0 = time.perf_counter()
        if n is not None:
            probe.prepare(n)
        hooked = hooks()
        loss = loss_fn(model(x).float().view(-1, 256), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if n is not None:
            probe.step_done()
        return time.perf_counter() - t0, hooked

    for n in (1, 2, 3):  # warm-up: torchao's imports and first kernels
        step(n)
    times: dict[str, list[float]] = {"bare": [], "not sampled": [], "sampled": []}
    hooked: dict[str, set[int]] = {k: set() for k in times}
    for r in range(args.rounds):
        base = 3 * (r + 2)
        for kind, n in (("bare", None), ("not sampled", base + 1), ("bare", None), ("not sampled", base + 2),
                        ("sampled", base + 3)):
            seconds, count = step(n)
            times[kind].append(seconds)
            hooked[kind].add(count)
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = statistics.median(abs(t - med["bare"]) for t in times["bare"]) / med["bare"]  # robust to stray steps
    print(f"amptui {amptui.__file__}  torch {torch.__version__}  GPT width {args.width} x {args.layers} blocks, "
          f"batch {args.batch}, {len(probe.layers)} linears, {args.rounds} rounds")
    print(f"{'steps':<12} {'median ms':>10} {'vs bare':>8} {'hooks':>6}")
    for kind in times:
        print(f"{kind:<12} {1000 * med[kind]:>10.2f} {med[kind] / med['bare']:>7.2f}x {max(hooked[kind]):>6}")
    between = med["not sampled"] / med["bare"] - 1
    ok = max(hooked["not sampled"]) == 0 and abs(between) <= max(0.03, 2 * spread)
    print(f"between samples: {100 * between:+.1f}% (bare steps' median deviation {100 * spread:.1f}%), hooks registered "
          f"{max(hooked['not sampled'])}: {'PASS' if ok else 'MISS'} (goal: no hook, within noise)")
    extra = med["sampled"] - med["bare"]
    print(f"a sampled step: +{1000 * extra:.1f} ms ({extra / med['bare']:.1f} bare steps); a plan's run pays it "
          "on 4 steps")


if __name__ == "__main__":
    main()
