"""An unmodified float16 loop with a GradScaler whose module `2.lin` (a linear with weights 1e6 times too
large) overflows float16's range in its forward on every step: the GradScaler skips step after step and
no loss scale fixes it. Issue 43: amptui names the module without being asked to sample."""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x))


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Block(), nn.Linear(16, 1))
with torch.no_grad():
    model[2].lin.weight.mul_(1e6)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
for step in range(30):
    x = torch.rand(32, 8) + 1.0
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
