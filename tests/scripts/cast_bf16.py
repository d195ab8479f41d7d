"""A loop that casts its model to bfloat16 and trains it so (never imports amptui): parameters,
gradients and AdamW's state in bfloat16, no float32 master copy, no autocast, no GradScaler.

    python cast_bf16.py [--steps N]
"""

import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

torch.manual_seed(0)
width = 16
model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)).to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
w = torch.randn(width, 1) / width ** 0.5
for step in range(args.steps):
    x = torch.randn(8, width)
    loss = nn.functional.mse_loss(model(x.to(torch.bfloat16)).float(), x @ w)
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"trained {args.steps} steps in bfloat16; final loss {loss.item():.4f}")
