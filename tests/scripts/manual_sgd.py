"""A loop with no torch.optim optimizer, unmodified (never imports amptui): the parameters are
updated by hand (p -= lr * p.grad), so there is no optimizer step for amptui to count."""

import torch

torch.manual_seed(0)
w = torch.randn(4, 1, requires_grad=True)
target = torch.randn(4, 1)
for _ in range(30):
    x = torch.randn(8, 4)
    loss = (x @ w - x @ target).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
print(f"final loss {loss.item():.4f}")
