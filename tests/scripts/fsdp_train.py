"""An FSDP2 script as people write it (never imports amptui): each block and the root sharded with
`fully_shard` and a MixedPrecisionPolicy (bfloat16 params, float32 reduce), no autocast, on an
explicit CPU mesh over gloo. Under torchrun it uses its environment; `--store PATH` makes a
one-process world from a file store (the in-process test).

    python fsdp_train.py [--store PATH] [--steps N] [--param-dtype bfloat16|float16]
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

p = argparse.ArgumentParser()
p.add_argument("--store", default="")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--param-dtype", default="bfloat16")
args = p.parse_args()

if args.store:
    dist.init_process_group("gloo", store=dist.FileStore(args.store, 1), rank=0, world_size=1)
else:
    dist.init_process_group("gloo")


class Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(2)])
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
policy = MixedPrecisionPolicy(param_dtype=getattr(torch, args.param_dtype), reduce_dtype=torch.float32)
for block in model.blocks:
    fully_shard(block, mesh=mesh, mp_policy=policy)
fully_shard(model, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=policy.param_dtype,
                                                             reduce_dtype=torch.float32, output_dtype=torch.float32))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
w = torch.randn(16, 1)
try:
    for _ in range(args.steps):
        x = torch.randn(8, 16)
        loss = nn.functional.mse_loss(model(x), x @ w)
        loss.backward()
        opt.step()
        opt.zero_grad()
finally:
    dist.destroy_process_group()
