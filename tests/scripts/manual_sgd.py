import torch
torch.manual_seed(0)
w = torch.randn(4, 1, requires_grad=True)
for _ in range(30):
    loss = (torch.randn(8, 4) @ w).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
