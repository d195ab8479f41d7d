"""The PyTorch AMP recipe's training loop, watched by amptui (the lines marked `# amptui`).

    python examples/amp_recipe_monitor.py                        # writes ./runs/<run id>/
    amptui run --script examples/amp_recipe_monitor.py -- --steps 30
    amptui runs; amptui watch RUN_ID

Recipe: https://pytorch.org/tutorials/recipes/recipes/amp_recipe.html (3 x Linear + ReLU, SGD,
MSELoss, torch.autocast + torch.amp.GradScaler, unscale_ before clip_grad_norm_). The defaults are
small so it runs on a CPU in seconds; the recipe's own sizes are --size 4096 --batch-size 512
--num-batches 50 (on a GPU). float16 is the GPU's format; on a CPU use bfloat16 (the default
there) or keep float16 tiny (--size 64): most CPUs compute float16 slowly.
"""

import argparse

import torch
from torch import nn

import amptui  # amptui


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers.append(nn.Linear(in_size, in_size))
        layers.append(nn.ReLU())
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


def main():
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=default_device)
    p.add_argument("--size", type=int, default=4096 if default_device == "cuda" else 256,
                   help="in/out features of every Linear")
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=512 if default_device == "cuda" else 64)
    p.add_argument("--num-batches", type=int, default=50 if default_device == "cuda" else 20)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=0, help="stop after this many optimizer steps (0 = all)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dtype", choices=("float16", "bfloat16"), default=None,
                   help="autocast dtype (default float16 on CUDA, bfloat16 on CPU)")
    p.add_argument("--no-amp", action="store_true", help="default precision (float32)")
    p.add_argument("--scaler", choices=("auto", "on", "off"), default="auto",
                   help="GradScaler: auto = on exactly for float16")
    p.add_argument("--init-scale", type=float, default=2.0 ** 16)
    p.add_argument("--growth-interval", type=int, default=2000)
    p.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_ max norm (0 = off)")
    p.add_argument("--log-every", type=int, default=5)
    args = p.parse_args()

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("float16" if device.type == "cuda" else "bfloat16"))
    use_amp = not args.no_amp
    use_scaler = use_amp and (args.scaler == "on" or (args.scaler == "auto" and dtype == torch.float16))

    torch.manual_seed(0)
    data = [torch.randn(args.batch_size, args.size, device=device) for _ in range(args.num_batches)]
    targets = [torch.randn(args.batch_size, args.size, device=device) for _ in range(args.num_batches)]
    loss_fn = nn.MSELoss().to(device)
    net = make_model(args.size, args.size, args.num_layers).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(device.type, init_scale=args.init_scale,
                                  growth_interval=args.growth_interval, enabled=use_scaler)

    total = min(args.steps or 10**9, args.epochs * args.num_batches)
    mon = amptui.Monitor("amp-recipe", scaler=scaler, optimizer=opt, model=net, log_every=args.log_every,  # amptui
                         total_steps=total, epochs=args.epochs,  # amptui
                         config={"amp": {"autocast": use_amp, "dtype": str(dtype).split(".")[-1],  # amptui
                                         "grad_scaler": use_scaler}, "optim": {"name": "sgd", "lr": args.lr}})  # amptui
    with mon:  # amptui: an exception ends the run as failed, with the error
        step = 0
        for epoch in range(args.epochs):
            for input, target in zip(data, targets):
                with torch.autocast(device_type=device.type, dtype=dtype, enabled=use_amp):
                    output = net(input)
                    loss = loss_fn(output, target)
                scaler.scale(loss).backward()
                if args.clip > 0:
                    scaler.unscale_(opt)  # unscale before clipping
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=args.clip)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                mon.step(loss, batch_size=args.batch_size)  # amptui: no host sync here
                step += 1
                if args.steps and step >= args.steps:
                    break
            mon.epoch()  # amptui
            if args.steps and step >= args.steps:
                break
    print(f"{step} steps; final loss {mon.last_loss}; run {mon.run_dir}")


if __name__ == "__main__":
    main()
