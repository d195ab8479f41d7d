"""A plain float32 loop with its own arguments, unmodified (never imports amptui): no autocast, no
GradScaler. `--bogus` (any unknown argument) ends it as argparse does: usage, an error line, exit 2.

    python float32_args.py [--steps N] [--lr LR]
"""

import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--lr", type=float, default=0.1)
args = p.parse_args()

torch.manual_seed(0)
w = torch.randn(8, 1)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for _ in range(args.steps):
    x = torch.randn(16, 8)
    loss = nn.functional.mse_loss(model(x), x @ w)
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"trained {args.steps} steps; final loss {loss.item():.4f}")
