"""Two models made inside main() (locals, not globals), two optimizers, one GradScaler whose
init_scale overflows float16 at once; each model stepped through a helper whose own argument
names (`model`) say nothing. Unmodified (never imports amptui), float16 on a CPU at toy size.

    python gan_in_main.py [--alias]   (--alias: the discriminator is also held as `critic`)
"""

import sys

import torch
from torch import nn


def train_step(model, optimizer, scaler, loss):
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return model


def main():
    torch.manual_seed(0)
    netG = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    netD = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    critic = netD if "--alias" in sys.argv else None
    opt_g = torch.optim.SGD(netG.parameters(), lr=0.01)
    opt_d = torch.optim.SGD(netD.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=2)
    for _ in range(6):
        noise, real = torch.randn(8, 16), torch.randn(8, 16) + 1.0
        with torch.autocast("cpu", dtype=torch.float16):
            loss_d = netD(netG(noise).detach()).mean() - netD(real).mean()
        train_step(netD, opt_d, scaler, loss_d)
        with torch.autocast("cpu", dtype=torch.float16):
            loss_g = -netD(netG(noise)).mean()
        train_step(netG, opt_g, scaler, loss_g)
    return critic


if __name__ == "__main__":
    main()
