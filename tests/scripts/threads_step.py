"""Two threads step one shared optimizer ROUNDS times each (a script that trains from worker
threads): every optimizer step is a training step, counted once. The interpreter switches threads
as often as it can meanwhile, so a race in the hooks' step accounting shows at once.

Two threads in zero_grad/backward at once is a race in torch itself (torch 2.13 and, on some CPUs,
2.14 segfault in `Optimizer.zero_grad`, which sets .grad to None under the other thread's backward),
not what this script asks of amptui: the gradients are made once before the threads start, zeroed in
place (set_to_none=False, so no thread ever swaps a .grad another one reads), and zero_grad and
backward hold a lock. `opt.step()`, the call the hooks count, stays outside it: the threads race there."""

import sys
import threading

import torch
import torch.nn as nn

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20

net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
grads = threading.Lock()
net(torch.randn(8, 4)).pow(2).mean().backward()  # the .grad tensors, once


def train() -> None:
    for _ in range(ROUNDS):
        with grads:
            loss = net(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(set_to_none=False)
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
