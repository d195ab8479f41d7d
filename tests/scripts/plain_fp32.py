"""A plain float32 training loop, unmodified (never imports amptui): a tiny MLP, SGD, gradient
clipping and a per-step schedule; no autocast, no GradScaler unless `--dtype` asks for them (its own
precision flag: bfloat16 autocasts, float16 autocasts with a GradScaler).

    python plain_fp32.py [--steps N] [--dtype float32|bfloat16|float16]
"""

import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
args = p.parse_args()

torch.manual_seed(0)
width = 32
model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100)
low = args.dtype != "float32"
scaler = torch.amp.GradScaler("cpu", enabled=args.dtype == "float16")
w = torch.randn(width, 1) / width ** 0.5
for step in range(args.steps):
    x = torch.randn(16, width)
    with torch.autocast("cpu", dtype=getattr(torch, args.dtype), enabled=low):
        loss = nn.functional.mse_loss(model(x), x @ w)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    sched.step()
print(f"trained {args.steps} steps ({args.dtype}); final loss {loss.item():.4f}")
