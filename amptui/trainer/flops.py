"""FLOPs of one training step (forward + loss + backward), counted once with
torch.utils.flop_counter, for the `tflops` field of step records."""

from __future__ import annotations

import torch
from torch import nn


def count_step_flops(model: nn.Module, criterion, x: torch.Tensor, y: torch.Tensor, device_type: str,
                     dtype: torch.dtype | None, autocast: bool) -> int:
    """FLOPs of forward (under autocast as the trainer runs it) + loss + backward on this batch.

    Counted on the meta device first (shapes only: no arithmetic, no memory, the same count, as
    the FLOP formulas depend on shapes alone); a model the meta device cannot follow (an op
    without a meta kernel, data-dependent control flow) is counted on a real forward/backward.
    Pass the unwrapped model (not DDP) and one micro-batch: with `amp.accumulate` > 1 a step is
    that many times this. Leaves no trace on training (parameters, gradients, buffers, RNG).
    Only matmuls/convolutions and the like are counted (the ops FlopCounterMode knows), which is
    the convention for achieved-vs-peak FLOP/s."""
    try:
        return count_on_meta(model, criterion, x, y)
    except Exception:  # noqa: BLE001 - fall back to the exact, slower way
        return count_for_real(model, criterion, x, y, device_type, dtype, autocast)


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)


def count_on_meta(model: nn.Module, criterion, x: torch.Tensor, y: torch.Tensor) -> int:
    """The step's FLOPs on the meta device (shapes only); raises where the model needs values."""
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    state = {name: _meta_like(p) for name, p in model.named_parameters()}
    state.update({name: torch.empty_like(b, device="meta") for name, b in model.named_buffers()})
    rng = torch.get_rng_state()
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            # autocast does not apply to meta tensors, and changes no FLOP formula anyway
            loss = criterion(functional_call(model, state, (_meta_like(x),)), _meta_like(y))
            loss.backward()
    finally:
        torch.set_rng_state(rng)
    return int(counter.get_total_flops())


def count_for_real(model: nn.Module, criterion, x: torch.Tensor, y: torch.Tensor, device_type: str,
                   dtype: torch.dtype | None, autocast: bool) -> int:
    """One real forward/backward; gradients (None stays None), buffers and RNG are put back."""
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
        for p, g in zip(params, saved_grads, strict=False):
            p.grad = g
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in saved_buffers:
                    b.copy_(saved_buffers[name])
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
