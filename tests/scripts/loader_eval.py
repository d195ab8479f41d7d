"""A classic epoch loop, unmodified (never imports amptui): DataLoader, bfloat16 autocast without
a GradScaler, gradient accumulation, a scheduler stepped per epoch, evaluation every epoch.

    python loader_eval.py [ACCUMULATE] [--eval-on-train]  (evaluate on the training DataLoader
    itself, the same object iterated again under no_grad, after a peek at its first batch)
"""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

accumulate = int(sys.argv[1]) if len(sys.argv) > 1 else 2
eval_on_train = "--eval-on-train" in sys.argv
epochs = 3
torch.manual_seed(0)
w = torch.randn(16, 4)
x = torch.randn(256, 16)
train = TensorDataset(x[:192], (x[:192] @ w).argmax(1))
val = TensorDataset(x[192:], (x[192:] @ w).argmax(1))
train_loader = DataLoader(train, batch_size=16, shuffle=True)
val_loader = DataLoader(val, batch_size=32)
if eval_on_train:
    val, val_loader = train, train_loader
    print("batch shape", tuple(next(iter(train_loader))[0].shape))  # a peek, as tutorials do
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.AdamW(model.parameters(), lr=0.02)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
loss_fn = nn.CrossEntropyLoss()


def evaluate():
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_loader:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                correct += (model(xb).argmax(1) == yb).sum().item()
    model.train()
    return correct / len(val)


for epoch in range(epochs):
    for i, (xb, yb) in enumerate(train_loader):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(xb), yb) / accumulate
        loss.backward()
        if (i + 1) % accumulate == 0:
            opt.step()
            opt.zero_grad()
    sched.step()
    print(f"epoch {epoch}: val acc {evaluate():.3f}")
