"""The PyTorch AMP recipe's training loop, hand-written, no amptui: the baseline the
benchmarks compare amptui's trainer against.

    python benchmarks/bare_recipe.py --dtype bf16 --width 1024 --batch 256 --steps 200 --warmup 20

Prints one JSON line: the mean milliseconds per optimizer step after `--warmup` steps
(with `--alternate N`: medians of N interleaved window pairs without / with amptui.Monitor).
Same model (depth x Linear(width) with ReLU), data (fixed random batches made up front and
reused, as the recipe does), SGD lr 1e-3, MSELoss, autocast + GradScaler spelled as the recipe.

The loop details that move a CPU's answer (benchmarks/loop_details.py times each): `--optimizer`
(torch's default foreach SGD, the fused kernel amptui's trainer takes, the per-parameter for-loop),
`--keep-grads` (zero_grad(set_to_none=False): gradients zeroed in place, not re-allocated),
`--no-scaler-calls` (plain backward/step instead of the disabled GradScaler's calls) and
`--reuse-host-memory` (the trainer's glibc settings, amptui/trainer/host_memory.py).
"""

import argparse
import json
import time

import torch
from torch import nn


def make_model(width: int, depth: int) -> nn.Sequential:
    layers = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, width))
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32")
    parser.add_argument("--scaler", action="store_true")
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=50, help="distinct batches, reused in order")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--optimizer", choices=("foreach", "fused", "forloop"), default="foreach",
                        help="SGD's implementation: torch's default (foreach), fused (amptui's), for-loop")
    parser.add_argument("--keep-grads", action="store_true", help="zero_grad(set_to_none=False)")
    parser.add_argument("--no-scaler-calls", action="store_true",
                        help="loss.backward(); opt.step() instead of the (disabled) GradScaler's calls")
    parser.add_argument("--reuse-host-memory", action="store_true",
                        help="the trainer's glibc settings: freed blocks kept for reuse")
    parser.add_argument("--monitor", action="store_true", help="add amptui.Monitor to the loop (its overhead)")
    parser.add_argument("--alternate", type=int, default=0, metavar="WINDOWS",
                        help="after --warmup, time WINDOWS pairs of --steps-step windows in this one process, "
                             "without and with amptui.Monitor.step (same heap, same process: only the Monitor differs)")
    args = parser.parse_args()

    device = torch.device(args.device)
    if args.reuse_host_memory:
        from amptui.trainer.host_memory import keep_freed_memory

        keep_freed_memory()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(args.batch, args.width, generator=g).to(device),
             torch.randn(args.batch, args.width, generator=g).to(device)) for _ in range(args.batches)]
    net = make_model(args.width, args.depth).to(device)
    implementation = {"foreach": {"foreach": True}, "fused": {"fused": True}, "forloop": {"foreach": False}}
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, **implementation[args.optimizer])
    loss_fn = nn.MSELoss()
    use_amp = args.dtype != "fp32"
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    scaler = torch.amp.GradScaler(device.type, enabled=args.scaler)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    monitor = None
    if args.monitor or args.alternate:  # the handful of lines a user adds to watch this loop in amptui
        import amptui

        monitor = amptui.Monitor("bare-recipe", scaler=scaler, optimizer=opt, model=net)
    if args.alternate:
        alternate(args, data, net, opt, loss_fn, scaler, dtype, use_amp, device, sync, monitor)
        return
    start = None
    for step in range(args.steps):
        if step == args.warmup:
            sync()
            start = time.perf_counter()
        x, y = data[step % len(data)]
        with torch.autocast(device_type=device.type, dtype=dtype, enabled=use_amp):
            output = net(x)
            loss = loss_fn(output, y)
        if args.no_scaler_calls:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        opt.zero_grad(set_to_none=not args.keep_grads)
        if monitor is not None:
            monitor.step(loss, batch_size=args.batch)
    sync()
    measured = args.steps - args.warmup
    ms = 1000 * (time.perf_counter() - start) / measured
    if monitor is not None:
        monitor.close()
    print(json.dumps({"dtype": args.dtype, "ms_per_step": ms, "samples_per_s": args.batch * 1000 / ms,
                      "optimizer": args.optimizer, "keep_grads": args.keep_grads,
                      "no_scaler_calls": args.no_scaler_calls, "reuse_host_memory": args.reuse_host_memory,
                      "steps": measured, "width": args.width, "batch": args.batch, "device": device.type}))


def alternate(args, data, net, opt, loss_fn, scaler, dtype, use_amp, device, sync, monitor) -> None:
    """Windows of the same loop without and with Monitor.step, interleaved in one process."""
    import statistics

    def window(steps: int, with_monitor: bool) -> float:
        sync()
        t0 = time.perf_counter()
        for step in range(steps):
            x, y = data[step % len(data)]
            with torch.autocast(device_type=device.type, dtype=dtype, enabled=use_amp):
                loss = loss_fn(net(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            if with_monitor:
                monitor.step(loss, batch_size=args.batch)
        sync()
        return 1000 * (time.perf_counter() - t0) / steps

    window(args.warmup, True)
    bare, monitored = [], []
    for _ in range(args.alternate):
        bare.append(window(args.steps, False))
        monitored.append(window(args.steps, True))
    monitor.close()
    print(json.dumps({"dtype": args.dtype, "ms_per_step": statistics.median(bare),
                      "monitor_ms_per_step": statistics.median(monitored),
                      "ratios": [m / b for b, m in zip(bare, monitored)], "windows": args.alternate,
                      "steps_per_window": args.steps, "device": device.type}))


if __name__ == "__main__":
    main()
