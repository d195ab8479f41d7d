"""A float32 loop whose loss is computed outside the model (sigmoid + binary cross-entropy on its
output, as VAEs do), unmodified (never imports amptui)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
target = (torch.rand(8, 16) > 0.5).float()
for _ in range(6):
    x = torch.randn(8, 16)
    recon = torch.sigmoid(model(x))
    loss = nn.functional.binary_cross_entropy(recon, target, reduction="sum") / 8
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"final loss {loss.item():.4f}")
