"""A loop that measures its training accuracy on each batch under torch.no_grad() (part of every
step) and evaluates after each epoch, unmodified (never imports amptui). The sleeps stand in for a
costlier metric and evaluation, so where their time goes is plain to see.

    python step_metrics.py [--plain]  (batches from tensors in a list, no DataLoader: no epochs)
                           [--metric-s S] [--eval-s S]  (seconds per step's metric / per eval batch)
                           [--train-batch N]  (16: 4 steps an epoch; 32: 2)
                           [--no-final-eval]  (evaluate between the epochs only, not after the last)
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--plain", action="store_true")
p.add_argument("--metric-s", type=float, default=0.05)
p.add_argument("--eval-s", type=float, default=0.3)
p.add_argument("--train-batch", type=int, default=16)
p.add_argument("--no-final-eval", action="store_true")
args = p.parse_args()

torch.manual_seed(0)
x = torch.randn(96, 8)
y = (x.sum(1) > 0).long()
train, val = TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])
b = args.train_batch
if args.plain:
    train_batches = [(x[i:i + b], y[i:i + b]) for i in range(0, 64, b)]
    val_batches = [(x[i:i + 16], y[i:i + 16]) for i in range(64, 96, 16)]
else:
    train_batches = DataLoader(train, batch_size=b)  # 64 / b steps an epoch
    val_batches = DataLoader(val, batch_size=16)     # 2 batches
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
epochs = 2
for epoch in range(epochs):
    for xb, yb in train_batches:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            train_acc = (model(xb).argmax(1) == yb).float().mean()
            time.sleep(args.metric_s)
    if args.no_final_eval and epoch == epochs - 1:
        break
    model.eval()
    with torch.no_grad():
        for xb, yb in val_batches:
            model(xb)
            time.sleep(args.eval_s)
    model.train()
print("done")
