"""A WGAN-style loop, unmodified (never imports amptui): the critic's optimizer steps N times for
each generator step, two models, two optimizers; float32, or bfloat16 autocast without a
GradScaler, or float16 autocast with one GradScaler updated after every optimizer step.

    python wgan.py [--n-critic N] [--iters N] [--dtype float32|bfloat16|float16] [--shape critic-first|every-nth]
                   [--losses FILE]  (the generator losses, one per generator step, as JSON)

critic-first: N critic steps, each on a fresh batch, then one generator step (Gulrajani et al.);
every-nth: a critic step on every batch, a generator step after every N-th (i % N == 0).
"""

import argparse
import json

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--n-critic", type=int, default=5)
p.add_argument("--iters", type=int, default=6)
p.add_argument("--dtype", default="float32")
p.add_argument("--shape", default="critic-first")
p.add_argument("--losses", default="")
args = p.parse_args()

torch.manual_seed(0)
width, batch = 16, 8
generator = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
critic = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-4)
opt_c = torch.optim.RMSprop(critic.parameters(), lr=1e-3)
autocast = torch.autocast("cpu", dtype=getattr(torch, args.dtype), enabled=args.dtype != "float32")
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, enabled=args.dtype == "float16")


def train(optimizer, loss):
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def real_batch():
    return torch.randn(batch, width) * 0.5 + 2.0


def critic_step():
    with autocast:
        fake = generator(torch.randn(batch, width)).detach()
        loss_c = critic(fake).mean() - critic(real_batch()).mean()
    train(opt_c, loss_c)
    for w in critic.parameters():  # the weight clipping of the original WGAN
        w.data.clamp_(-0.1, 0.1)


generator_losses = []


def generator_step():
    with autocast:
        loss_g = -critic(generator(torch.randn(batch, width))).mean()
    train(opt_g, loss_g)
    generator_losses.append(loss_g.item())


if args.shape == "critic-first":
    for _ in range(args.iters):
        for _ in range(args.n_critic):
            critic_step()
        generator_step()
else:
    for i in range(args.iters * args.n_critic):
        critic_step()
        if i % args.n_critic == 0:
            generator_step()
if args.losses:
    with open(args.losses, "w") as f:
        json.dump(generator_losses, f)
print(f"{len(generator_losses)} generator steps")
