"""A physics-informed net takes its output's derivative inside its own forward (torch.autograd.grad), so
its forward cannot run under no_grad; a layer overflows float16 on the first step. amptui's replay of
that forward fails: the run must go on being recorded (the sampling fallback names the module)."""

import torch
import torch.nn as nn


class Pinn(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.head = nn.Linear(8, 16), nn.Linear(16, 1)

    def forward(self, x):
        x = x.requires_grad_(True)
        u = self.head(torch.tanh(self.inp(x)) * 1e5)
        (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        return u + du.sum(dim=1, keepdim=True)


torch.manual_seed(0)
model = Pinn()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
for step in range(8):
    x = torch.rand(16, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
