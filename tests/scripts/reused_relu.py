"""Issue 51.5: a reused `self.relu` (as PyTorch's super_resolution example has) after a conv whose
output overflows float16: amptui names the conv, not the relu that only passed the inf on. An
unmodified float16 loop with a GradScaler; never imports amptui."""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        return self.conv3(x)


torch.manual_seed(0)
model = Net()
with torch.no_grad():
    model.conv2.weight.abs_().mul_(1e5)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
for step in range(6):
    x = torch.rand(4, 1, 8, 8) + 1.0
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
