"""A float32 loop that saves its whole model (`torch.save(model, path)`, as PyTorch's examples do)
and deep-copies its model and optimizer (an EMA copy, a best-so-far snapshot). Never imports amptui.

    python saves_model.py OUT_DIR [--steps N]
"""

import argparse
import copy
import pickle

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(args.steps):
    x = torch.randn(4, 8)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step == 1:
        ema = copy.deepcopy(model)
        best_opt = copy.deepcopy(opt)
        assert all(torch.equal(a, b) for a, b in zip(ema.state_dict().values(), model.state_dict().values()))
        with torch.no_grad():
            ema(x)
        assert best_opt.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
torch.save(model, f"{args.out}/model.pt")
pickle.dumps((model, opt))
print("saved", len(pickle.dumps(ema)))
