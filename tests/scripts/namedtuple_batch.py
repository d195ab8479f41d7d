"""A model called with a namedtuple batch (as RNNs take a PackedSequence, itself a namedtuple): amptui keeps
the last training forward's inputs for the replay; the namedtuple must neither stop the recording nor the
replay, which names the model's own code after `boom` (its output times 1e4 overflows float16)."""

import collections

import torch
import torch.nn as nn

Batch = collections.namedtuple("Batch", "x scale")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.boom, self.head = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 1)

    def forward(self, batch):
        return self.head(torch.relu(self.boom(torch.relu(self.inp(batch.x))) * batch.scale))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
for step in range(6):
    batch = Batch(torch.randn(32, 8) * 40, 1e4)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(batch).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
