"""A plain float32 loop (no autocast, no scaler) whose middle linear's outputs (~1e6) are beyond float16's
range (65504) and well inside float32's: its loss is finite as written, and turns non-finite from the
first step when amptui applies fp16 (issue 41.3)."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
with torch.no_grad():
    model[2].weight.mul_(1e6)
opt = torch.optim.SGD(model.parameters(), lr=1e-12)  # tiny: the float32 loop stays finite
for step in range(6):
    x = torch.rand(32, 8) + 1.0
    loss = model(x).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
