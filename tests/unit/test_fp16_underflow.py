"""The `fp16_underflow` warning (issue 41 item 4): a float16 loop without a GradScaler is warned when its
float16 backward flushes to zero gradient values that float32 keeps, counted on a sampled step against the
same step's backward with the loss scaled (telemetry/scripthooks/underflow.py). Exact zeros that float32
gives too (a zero-initialised norm layer) are not underflow; a float32 loop is never checked. Tiny models."""

from __future__ import annotations

import torch
from torch import nn

from amptui.telemetry.scripthooks.underflow import flushed_counts


def _mlp(zero_norm: bool = False) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.LayerNorm(32), nn.Linear(32, 1))
    if zero_norm:
        nn.init.zeros_(model[3].weight)
    return model


def _loss(model: nn.Module, autocast: bool, tiny: float = 1.0) -> torch.Tensor:
    x, y = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)), torch.full((8, 1), 0.5)
    with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
        return nn.functional.mse_loss(model(x) * tiny, y * tiny)


def test_a_float16_backward_that_flushes_small_gradients_is_counted_against_the_scaled_reference():
    model = _mlp()
    flushed, kept = flushed_counts(_loss(model, autocast=True, tiny=1e-4), list(model.parameters())).tolist()
    assert kept > 0 and flushed / kept > 0.9  # 1e-4 * 1e-4-sized gradients: below float16's smallest subnormal
    flushed32, kept32 = flushed_counts(_loss(model, autocast=False, tiny=1e-4), list(model.parameters())).tolist()
    assert flushed32 == 0 and kept32 >= kept  # a float32 backward flushes none: nothing to say


def test_a_float16_loss_gets_a_reference_its_dtype_can_hold():
    """A loss computed in float16 (pow and mean under CPU autocast): its gradient seed is float16, so the
    reference is scaled by 2**15, not 2**16 (inf): the flushed gradients are still counted."""
    model = _mlp()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    with torch.autocast("cpu", dtype=torch.float16):
        loss = ((model(x) * 1e-4 - 5e-5) ** 2).mean()
    assert loss.dtype == torch.float16
    flushed, kept = flushed_counts(loss, list(model.parameters())).tolist()
    assert kept > 0 and flushed / kept > 0.9


def test_exact_zeros_float32_gives_too_are_not_underflow():
    model = _mlp(zero_norm=True)
    params = list(model.parameters())
    flushed, kept = flushed_counts(_loss(model, autocast=True), params).tolist()
    loss = _loss(model, autocast=True)
    loss.backward()
    zeros = sum(int((p.grad == 0).sum()) for p in params)
    assert zeros / sum(p.numel() for p in params) > 0.5  # mostly exact zeros (the old rule warned on them) ...
    assert kept > 0 and flushed == 0  # ... none of which float16 flushed: float32 has them as zeros too


def test_the_check_leaves_the_loops_own_gradients_as_they_were():
    model = _mlp()
    loss = _loss(model, autocast=True)
    assert flushed_counts(loss, list(model.parameters())) is not None
    assert all(p.grad is None for p in model.parameters())  # no .grad touched
    loss.backward()  # the graph is still there for the loop's own backward
    checked = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    _loss(model, autocast=True).backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(checked, model.parameters(), strict=True))


def test_a_graph_that_cannot_be_differentiated_twice_is_not_checked_and_the_loop_still_trains():
    """A reentrant checkpoint in the middle refuses torch.autograd.grad: no check, and the loop's own
    backward then gives the gradients it gives without the check."""
    from torch.utils.checkpoint import checkpoint

    def loss_of(model: nn.Module) -> torch.Tensor:
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
        with torch.autocast("cpu", dtype=torch.float16):
            inner = checkpoint(model[1:4], model[0](x), use_reentrant=True)
            return model[4](inner).float().pow(2).mean()

    model = _mlp()
    loss = loss_of(model)
    assert flushed_counts(loss, list(model.parameters())) is None
    assert all(p.grad is None for p in model.parameters())
    loss.backward()
    checked = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    loss_of(model).backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(checked, model.parameters(), strict=True))
