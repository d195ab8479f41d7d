"""A float32 loop that saves its whole model after every step (`torch.save(model)` to a buffer, `pickle`,
`copy.deepcopy`), as checkpointing examples do. Never imports amptui: under `--set numerics.every=1` the
range sampler's hooks are on the model between steps, and must not make it unpicklable (issue 51.9)."""

import copy
import io
import pickle

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(4):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch.save(model, io.BytesIO())
    pickle.dumps(model)
    copy.deepcopy(model)(torch.randn(2, 8))
print("saved every step")
