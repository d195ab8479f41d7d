"""Two models, two optimizers, one GradScaler: the torch AMP docs' "multiple models, losses and
optimizers" example, unmodified (never imports amptui), float16 on a CPU at toy size."""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
model0, model1 = Encoder(), Decoder()
optimizer0 = torch.optim.SGD(model0.parameters(), lr=0.05)
optimizer1 = torch.optim.SGD(model1.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=4)
loss_fn = nn.MSELoss()
data = [(torch.randn(8, 16), torch.randn(8, 16)) for _ in range(8)]
for epoch in range(3):
    for input, target in data:
        optimizer0.zero_grad()
        optimizer1.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            output0 = model0(input)
            output1 = model1(input)
            loss0 = loss_fn(2 * output0 + 3 * output1, target)
            loss1 = loss_fn(3 * output0 - 5 * output1, target)
        scaler.scale(loss0).backward(retain_graph=True)
        scaler.scale(loss1).backward()
        scaler.unscale_(optimizer0)
        scaler.step(optimizer0)
        scaler.step(optimizer1)
        scaler.update()
