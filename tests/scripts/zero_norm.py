"""A float16 autocast loop without a GradScaler whose last norm layer starts at zero weight (as some
residual-block recipes initialise it): every gradient upstream of it is an exact zero, in float32
too, and nothing underflows. Never imports amptui.

    python zero_norm.py [float16|float32]
"""

import sys

import torch
from torch import nn

dtype = sys.argv[1] if len(sys.argv) > 1 else "float16"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 4))
nn.init.zeros_(model[3].weight)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
for step in range(6):
    with torch.autocast("cpu", dtype=torch.float16, enabled=dtype == "float16"):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step + 1} loss {loss.item():.6f}", flush=True)
