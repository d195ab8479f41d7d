"""Two threads step one shared optimizer ROUNDS times each (a script that trains from worker
threads): every optimizer step is a training step, counted once. The interpreter switches threads
as often as it can meanwhile, so a race in the hooks' step accounting shows at once."""

import sys
import threading

import torch
import torch.nn as nn

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20

net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.01)


def train() -> None:
    for _ in range(ROUNDS):
        loss = net(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


before = sys.getswitchinterval()
sys.setswitchinterval(1e-6)
try:
    threads = [threading.Thread(target=train) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
finally:
    sys.setswitchinterval(before)
