"""Four threads, each training a model of its own with an optimizer of its own, ROUNDS steps each
(issue 40 item 12): the optimizers step on their threads' clocks, not in one loop's order, so
amptui's step (every optimizer in use stepped once) cannot be counted; the run is told so.

Each thread's model, data and gradients are its own: no tensor is shared between threads."""

import sys
import threading

import torch
import torch.nn as nn

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 25


def train(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    net = nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(ROUNDS):
        loss = net(torch.randn(8, 4, generator=gen)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


threads = [threading.Thread(target=train, args=(seed,)) for seed in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("4 threads trained")
