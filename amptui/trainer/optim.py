"""Optimizers and learning-rate schedules of the presets."""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau

from amptui.core.config.values import Config

OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def build_optimizer(cfg: Config, params, fused: bool = True) -> torch.optim.Optimizer:
    """The preset's optimizer, fused wherever this torch has a fused kernel for the device (CUDA;
    the CPU in newer torch). Also with a GradScaler: a fused optimizer takes the scaler's found_inf
    on the device, so scaler.step() needs no host sync. Support is detected by constructing one,
    never assumed; otherwise torch's default (foreach) implementation. `fused` False: the default one
    (FSDP2's DTensor shards have no sharding rule for the fused kernels)."""
    o = cfg.optim
    params = list(params)
    kwargs = dict(lr=o.lr, weight_decay=o.weight_decay)
    if o.name == "sgd":
        kwargs["momentum"] = o.momentum
    if o.name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {o.name!r}")
    cls = OPTIMIZERS[o.name]
    if not fused:
        return cls(params, **kwargs)
    try:
        optimizer = cls(params, fused=True, **kwargs)
    except (TypeError, RuntimeError, ValueError):  # no `fused` in this torch, or not for this device
        return cls(params, **kwargs)
    if o.name == "sgd" and o.momentum:
        init_momentum_buffers(optimizer)
    return optimizer


def implementation_line(optimizer: torch.optim.Optimizer) -> str:
    """One line for the run's log: which kernel steps the parameters, and how gradients are reset.
    Both move a CPU's A/B answer (docs/ab-results.md): a hand loop with torch's defaults differs."""
    name = type(optimizer).__name__
    kernel = ("fused kernel (torch's default is foreach)" if optimizer.defaults.get("fused")
              else "torch's default implementation")
    return f"optimizer: {name}, {kernel}; gradients set to None after each step (allocated again by the next backward)"


def init_momentum_buffers(optimizer: torch.optim.Optimizer) -> None:
    """Fused SGD allocates its momentum buffers with empty_like on its first step and lets the kernel
    fill them; a first step skipped by the GradScaler would leave them uninitialised. Zeros give the
    same first step (buf = grad, without dampening) and stay right when that step is skipped."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p, memory_format=torch.preserve_format))


class Schedule:
    """One interface over the presets' schedules.

    `optimizer_stepped()` is called only for an optimizer step known to have happened (not one the
    GradScaler skipped; the loop may learn that a step or two late, never guesses), so a skipped
    step never advances the lr; `epoch_done(train_loss)`
    drives ReduceLROnPlateau on the mean epoch train loss, as in the AlexNet blog.
    """

    def __init__(self, cfg: Config, optimizer: torch.optim.Optimizer, steps_per_epoch: int, total_steps: int):
        s = cfg.sched
        self.name = s.name
        self.optimizer = optimizer
        self.impl: LambdaLR | ReduceLROnPlateau | None = None
        if s.name == "cosine":
            warmup = int(round(s.warmup_epochs * steps_per_epoch))
            base_lr = cfg.optim.lr
            floor = s.min_lr / base_lr if base_lr > 0 else 0.0

            def factor(step: int) -> float:
                if step < warmup:  # gradual warmup from lr/100 to lr
                    return 0.01 + 0.99 * step / warmup
                progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
                return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

            self.impl = LambdaLR(optimizer, factor)
        elif s.name == "plateau":
            self.impl = ReduceLROnPlateau(
                optimizer, mode="min", factor=s.factor, patience=s.patience, min_lr=s.min_lr)

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def optimizer_stepped(self) -> None:
        if isinstance(self.impl, LambdaLR):  # cosine
            self.impl.step()

    def epoch_done(self, train_loss: float) -> None:
        if isinstance(self.impl, ReduceLROnPlateau) and math.isfinite(train_loss):
            self.impl.step(train_loss)

    def state_dict(self) -> dict:
        return self.impl.state_dict() if self.impl is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.impl is not None and state:
            self.impl.load_state_dict(state)
