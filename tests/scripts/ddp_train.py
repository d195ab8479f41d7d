"""A DDP script as people write it for torchrun (never imports amptui): gloo on CPU, a
DistributedSampler, bfloat16 autocast, one epoch per set_epoch."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
w = torch.randn(16, 1)
x = torch.randn(128, 16)
data = TensorDataset(x, x @ w)
sampler = DistributedSampler(data, shuffle=True)
loader = DataLoader(data, batch_size=8, sampler=sampler)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
print(f"rank {rank} of {os.environ['WORLD_SIZE']}: done")
dist.destroy_process_group()
