"""Optimizers and learning-rate schedules of the presets."""

from __future__ import annotations

import math

import torch


def build_optimizer(cfg, params, device: torch.device, grad_scaler: bool) -> torch.optim.Optimizer:
    o = cfg.optim
    # Fused kernels on CUDA, except with a GradScaler: there GradScaler.step reads the inf flag on
    # the host for a non-fused optimizer anyway, and the trainer uses that same read to keep the lr
    # schedule off skipped steps and to name the overflowing layers. With a fused optimizer the
    # flag never leaves the GPU, so knowing about a skip would cost a sync of its own each step.
    extra = {"fused": True} if device.type == "cuda" and not grad_scaler else {}
    if o.name == "adamw":
        return torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay, **extra)
    if o.name == "adam":
        return torch.optim.Adam(params, lr=o.lr, weight_decay=o.weight_decay, **extra)
    if o.name == "sgd":
        return torch.optim.SGD(params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay, **extra)
    raise ValueError(f"unknown optimizer {o.name!r}")


class Schedule:
    """One interface over the presets' schedules.

    `optimizer_stepped()` is called only after an optimizer step that really happened (not one
    the GradScaler skipped), so a skipped step never advances the lr; `epoch_done(train_loss)`
    drives ReduceLROnPlateau on the mean epoch train loss, as in the AlexNet blog.
    """

    def __init__(self, cfg, optimizer: torch.optim.Optimizer, steps_per_epoch: int, total_steps: int):
        s = cfg.sched
        self.name = s.name
        self.optimizer = optimizer
        self.impl = None
        if s.name == "cosine":
            warmup = int(round(s.warmup_epochs * steps_per_epoch))
            base_lr = cfg.optim.lr
            floor = s.min_lr / base_lr if base_lr > 0 else 0.0

            def factor(step: int) -> float:
                if step < warmup:  # gradual warmup from lr/100 to lr
                    return 0.01 + 0.99 * step / warmup
                progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
                return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

            self.impl = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        elif s.name == "plateau":
            self.impl = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=s.factor, patience=s.patience, min_lr=s.min_lr)

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def optimizer_stepped(self) -> None:
        if self.name == "cosine":
            self.impl.step()

    def epoch_done(self, train_loss: float) -> None:
        if self.name == "plateau" and math.isfinite(train_loss):
            self.impl.step(train_loss)

    def state_dict(self) -> dict:
        return self.impl.state_dict() if self.impl is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.impl is not None and state:
            self.impl.load_state_dict(state)
