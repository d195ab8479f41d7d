"""count_step_flops: one training step's FLOPs, counted without disturbing training."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from amptui.trainer.flops import count_step_flops
from amptui.trainer.models import SmallCNN, recipe_mlp


def _linear_forward_flops(batch: int, layers: list[nn.Linear]) -> int:
    """Analytic: a Linear(K -> N) on M rows is an M x K @ K x N product, 2*M*N*K FLOPs."""
    return sum(2 * batch * layer.in_features * layer.out_features for layer in layers)


@pytest.mark.parametrize("autocast, dtype", [(False, None), (True, torch.bfloat16)])
def test_linear_step_is_three_forwards(autocast, dtype):
    """Backward of y = x W^T is two products of the same size (dL/dx and dL/dW): 3x the forward."""
    torch.manual_seed(0)
    layer = nn.Linear(96, 80)
    x = torch.randn(48, 96, requires_grad=True)
    y = torch.randn(48, 80)
    flops = count_step_flops(layer, nn.MSELoss(), x, y, "cpu", dtype, autocast)
    assert flops == pytest.approx(3 * 2 * 48 * 80 * 96, rel=0.01)


def test_mlp_step_matches_analytic_count():
    torch.manual_seed(0)
    mlp = recipe_mlp(width=128, depth=3)
    linears = [m for m in mlp if isinstance(m, nn.Linear)]
    fwd = _linear_forward_flops(64, linears)
    y = torch.randn(64, 128)
    # Input that needs its gradient: forward x 3.
    x = torch.randn(64, 128, requires_grad=True)
    assert count_step_flops(mlp, nn.MSELoss(), x, y, "cpu", torch.bfloat16, True) == pytest.approx(3 * fwd, rel=0.01)
    # A data batch (no gradient wanted for it): the first layer skips dL/dx, one product less.
    x = torch.randn(64, 128)
    first = _linear_forward_flops(64, linears[:1])
    assert count_step_flops(mlp, nn.MSELoss(), x, y, "cpu", torch.bfloat16, True) == pytest.approx(3 * fwd - first, rel=0.01)
    # Autocast does not change the count.
    assert count_step_flops(mlp, nn.MSELoss(), x, y, "cpu", None, False) == pytest.approx(3 * fwd - first, rel=0.01)


def test_small_cnn_counts_and_leaves_training_untouched(capsys):
    torch.manual_seed(0)
    model = SmallCNN(num_classes=10, width=8).train()
    # Gradients as a training loop might hold them (some set, one None) must come back as they were.
    grads = {}
    for i, (name, p) in enumerate(model.named_parameters()):
        p.grad = None if i == 0 else torch.full_like(p, 0.5)
        grads[name] = None if p.grad is None else p.grad.clone()
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    rng = torch.get_rng_state()

    flops = count_step_flops(model, nn.CrossEntropyLoss(), x, y, "cpu", torch.bfloat16, True)

    head = 3 * 2 * 4 * model.head.in_features * model.head.out_features
    assert flops > head > 0            # the convolutions count too
    for name, p in model.named_parameters():
        if grads[name] is None:
            assert p.grad is None, name
        else:
            assert torch.equal(p.grad, grads[name]), name
    for name, b in model.named_buffers():   # batch-norm running statistics, num_batches_tracked
        assert torch.equal(b, buffers[name]), name
    assert torch.equal(torch.get_rng_state(), rng)
    assert model.training
    assert capsys.readouterr().out == ""    # FlopCounterMode prints nothing


def test_torchvision_models():
    """resnet18 is ~1.82 GMAC per 224x224 image forward: 3.6 GFLOP, ~3x that for a step
    (a little less: no gradient for the input image)."""
    from torchvision import models

    torch.manual_seed(0)
    resnet = models.resnet18(weights=None, num_classes=10)
    x, y = torch.randn(1, 3, 224, 224), torch.randint(0, 10, (1,))
    flops = count_step_flops(resnet, nn.CrossEntropyLoss(), x, y, "cpu", torch.bfloat16, True)
    assert 9.5e9 < flops < 11.5e9, flops
    assert all(p.grad is None for p in resnet.parameters())

    alexnet = models.alexnet(weights=None, num_classes=10)     # has dropout: draws from the RNG
    x = torch.randn(1, 3, 227, 227)
    rng = torch.get_rng_state()
    flops = count_step_flops(alexnet, nn.CrossEntropyLoss(), x, y, "cpu", torch.bfloat16, True)
    assert 3e9 < flops < 5e9, flops
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None for p in alexnet.parameters())


def test_meta_count_equals_a_real_step_and_odd_models_fall_back(monkeypatch):
    """The count runs on the meta device (shapes only, no arithmetic: start-up does not pay a
    training step for it) and gives exactly what a real forward/backward counts; a model the meta
    device cannot run (data-dependent control flow) is counted the real way."""
    from torchvision import models

    from amptui.trainer import flops as flopsmod

    torch.manual_seed(0)
    resnet = models.resnet18(weights=None, num_classes=6)
    x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 6, (2,))
    real = flopsmod.count_for_real(resnet, nn.CrossEntropyLoss(), x, y, "cpu", None, False)  # float32: FLOPs need no bf16
    assert flopsmod.count_on_meta(resnet, nn.CrossEntropyLoss(), x, y) == real > 0

    class DataDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

        def forward(self, x):
            return self.a(x) if x.sum() > 0 else self.b(x)   # reads a value: impossible on meta

    model, x = DataDependent(), torch.ones(4, 16)
    with pytest.raises(Exception):
        flopsmod.count_on_meta(model, nn.MSELoss(), x, torch.zeros(4, 16))
    assert count_step_flops(model, nn.MSELoss(), x, torch.zeros(4, 16), "cpu", None, False) == \
        pytest.approx(2 * 2 * 4 * 16 * 16, rel=0.01)   # forward + weight gradient, no input gradient
