"""FLOPs of one training step (forward + loss + backward), counted once with
torch.utils.flop_counter, for the `tflops` field of step records."""

from __future__ import annotations

import torch
from torch import nn


def count_step_flops(model: nn.Module, criterion, x: torch.Tensor, y: torch.Tensor, device_type: str,
                     dtype: torch.dtype | None, autocast: bool) -> int:
    """FLOPs of forward (under autocast as the trainer runs it) + loss + backward on this batch.

    Runs one real forward/backward, so pass the unwrapped model (not DDP: its backward would
    all-reduce) and one micro-batch: with `amp.accumulate` > 1 a step is that many times this.
    Leaves no trace on training: gradients are put back as they were (None when they were
    None), batch-norm running statistics and other buffers are restored, and so is the RNG
    (dropout draws from it). Only matmuls/convolutions and the like are counted (the ops
    FlopCounterMode knows), which is the convention for achieved-vs-peak FLOP/s."""
    from torch.utils.flop_counter import FlopCounterMode

    params = [p for p in model.parameters()]
    saved_grads = [p.grad for p in params]
    saved_buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if device_type == "cuda" and torch.cuda.is_initialized() else None
    for p in params:
        p.grad = None
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            with torch.autocast(device_type, dtype=dtype, enabled=bool(autocast)):
                loss = criterion(model(x), y)
            loss.backward()          # outside autocast, as in the trainer
        return int(counter.get_total_flops())
    finally:
        for p, g in zip(params, saved_grads):
            p.grad = g
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in saved_buffers:
                    b.copy_(saved_buffers[name])
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
