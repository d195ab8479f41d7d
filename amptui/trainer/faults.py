"""Fault injection (`debug.*`) for demos and tests, in one object built with the training state,
so the training step holds two calls and no debug logic.

- inject_inf_every: poison one gradient with inf every N optimizer steps (the GradScaler must
  skip the step and back off);
- fail_at_step / fail_rank: raise in that rank once that step is done;
- slow_checkpoint_s / slow_eval_s: sleep in each checkpoint write / evaluation (the step windows
  must leave them out).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Faults:
    inject_inf_every: int = 0
    fail_at_step: int = 0
    fail_rank: int = 0
    slow_checkpoint_s: float = 0.0
    slow_eval_s: float = 0.0
    rank: int = 0

    @classmethod
    def of(cls, debug_cfg, rank: int) -> Faults:
        d = debug_cfg
        return cls(inject_inf_every=d.inject_inf_every, fail_at_step=d.fail_at_step, fail_rank=d.fail_rank,
                   slow_checkpoint_s=d.slow_checkpoint_s, slow_eval_s=d.slow_eval_s, rank=rank)

    def after_backward(self, step: int, model: nn.Module) -> None:
        """`step`: the optimizer step these gradients are for (1-based)."""
        if self.inject_inf_every and step % self.inject_inf_every == 0:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            if grads:
                poison_first(grads[-1])

    def after_step(self, step: int) -> None:
        """`step`: the optimizer step just done."""
        if self.fail_at_step and step == self.fail_at_step and self.rank == self.fail_rank:
            raise RuntimeError(f"debug.fail_at_step: injected failure at step {step} on rank {self.rank}")

    def after_checkpoint(self) -> None:
        if self.slow_checkpoint_s:
            time.sleep(self.slow_checkpoint_s)

    def after_eval(self) -> None:
        if self.slow_eval_s:
            time.sleep(self.slow_eval_s)


def poison_first(grad: torch.Tensor) -> None:
    """inf into the gradient's first element. A sharded gradient (an FSDP2 DTensor) holds it in the
    first rank's shard only: the other ranks learn of it through the GradScaler's reduced found_inf."""
    if hasattr(grad, "to_local"):
        if grad.device_mesh.get_local_rank() != 0:  # type: ignore[attr-defined]
            return
        grad = grad.to_local()
    if grad.numel():
        grad[(0,) * grad.dim()] = float("inf")
