"""A forward whose NaN is no overflow: the log of a negative value, NaN in float32 as in float16, on every
step, with no GradScaler: the weights are NaN after the first step, so neither the replay nor sampling
says a cause. Later records must not replay again (once per run: every record would pay one more forward)."""

import torch
import torch.nn as nn


class LogNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.head = nn.Linear(8, 16), nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.log(self.inp(x) - 100.0))


torch.manual_seed(0)
model = LogNet()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(10):
    x = torch.rand(16, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
