"""A tiny float16 autocast + GradScaler loop that waits for a file before its first step (never
imports amptui): while it waits, nothing has shown its precision yet.

    python gated.py GATE_FILE [--steps N]
"""

import argparse
import os
import time

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("gate")
p.add_argument("--steps", type=int, default=3)
args = p.parse_args()

deadline = time.monotonic() + 120  # never hang a test run for good
while not os.path.exists(args.gate) and time.monotonic() < deadline:
    time.sleep(0.05)

torch.manual_seed(0)
net = nn.Linear(16, 16)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
for _ in range(args.steps):
    with torch.autocast("cpu", dtype=torch.float16):
        loss = net(torch.randn(8, 16)).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
