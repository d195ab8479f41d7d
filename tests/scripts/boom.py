"""Issue 51.5: a module whose forward multiplies its linear's output by 1e4 (functional code inside a parent
module, as attention scores are) overflows float16 on the first step; the linear after it (`head`) only
passes the inf on. An unmodified float16 loop with a GradScaler: amptui names `boom`, unasked."""

import torch
import torch.nn as nn


class Boom(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x) * 1e4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.boom = Boom()
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.relu(self.boom(self.relu(self.inp(x)))))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
for step in range(12):
    x = torch.randn(32, 8) * 40
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
