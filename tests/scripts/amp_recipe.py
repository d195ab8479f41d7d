"""The PyTorch AMP recipe's loop, unmodified (never imports amptui), at toy size for a CPU.

    python amp_recipe.py [--dtype float16|bfloat16] [--no-scaler] [--no-unscale] [--accumulate N]
                         [--blow-up N]  (layer N's output past float16's range, from the first step)
                         [--nan-at N]  (step N's batch holds a NaN) [--losses FILE]  (each step's true
                         loss, the mean of its micro-batches' undivided losses, as JSON)
"""

import argparse
import json

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--dtype", default="float16")
p.add_argument("--no-scaler", action="store_true")
p.add_argument("--no-unscale", action="store_true", help="the mistake: clip the still-scaled gradients")
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--init-scale", type=float, default=2.0 ** 16)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--fail-at", type=int, default=0)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--blow-up", type=int, default=-1, help="scale layer N's weights by 1e6: its float16 output overflows")
p.add_argument("--nan-at", type=int, default=0)
p.add_argument("--losses", default="")
args = p.parse_args()

torch.manual_seed(0)
size, batch = 32, 16
net = nn.Sequential(nn.Linear(size, size), nn.ReLU(), nn.Linear(size, size), nn.ReLU(), nn.Linear(size, size))
if args.blow_up >= 0:
    with torch.no_grad():
        net[args.blow_up].weight.mul_(1e6)
opt = torch.optim.SGD(net.parameters(), lr=args.lr)
dtype = getattr(torch, args.dtype)
scaler = torch.amp.GradScaler("cpu", init_scale=args.init_scale, growth_interval=5, enabled=not args.no_scaler)
w = torch.randn(size, size) / size ** 0.5
data = [torch.randn(batch, size) for _ in range(args.steps)]
targets = [x @ w for x in data]
done, micro, true_losses = 0, [], []
for epoch in range(args.epochs):
    for i, (x, y) in enumerate(zip(data, targets)):
        if args.nan_at and done + 1 == args.nan_at:
            x = x.clone()
            x[0, 0] = float("nan")
        with torch.autocast(device_type="cpu", dtype=dtype):
            full = nn.functional.mse_loss(net(x), y)
            loss = full / args.accumulate
        micro.append(full.item())
        scaler.scale(loss).backward()
        if (i + 1) % args.accumulate:
            continue
        if not args.no_unscale:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        done += 1
        true_losses.append(sum(micro) / len(micro))
        micro = []
        if args.fail_at and done == args.fail_at:
            raise RuntimeError(f"the data went away at step {done}")
if args.losses:
    with open(args.losses, "w") as f:
        json.dump(true_losses, f)
print(f"done {done} steps, loss {loss.item():.4f}")
