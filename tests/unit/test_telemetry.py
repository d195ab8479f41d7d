"""The trainer and amptui.Monitor record through one telemetry package: honest step windows
(training steps only), no host read of a device value in a steady-state step, an lr schedule that
skipped steps never advance, and the same step-record fields from both writers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from amptui.telemetry import torch_amp
from amptui.telemetry.scaler import SkipLedger
from amptui.trainer.optim import build_optimizer


def test_the_skip_ledger_hands_out_flags_in_step_order():
    ledger = SkipLedger(torch.device("cpu"), capacity=3)
    for step, flag in enumerate([0.0, 1.0, 0.0, 0.0, 1.0], start=1):  # more than its capacity
        ledger.record(step, torch.tensor(flag))
    assert ledger.known() == [(1, False), (2, True), (3, False), (4, False), (5, True)]
    assert ledger.settle() == [] and len(ledger) == 0


def test_private_torch_amp_api_reads_the_scaler_on_the_device():
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    assert torch_amp.scale_tensor(scaler) is None  # before the first scale()
    for poison in (False, True):
        scaler.scale(model(torch.ones(2, 4)).sum()).backward()
        if poison:
            model.weight.grad[0, 0] = float("nan")
        scaler.step(opt)
        flag = torch_amp.found_inf(scaler, opt)
        assert flag.shape == () and flag.item() == float(poison)
        scaler.update()
        opt.zero_grad()
    assert torch_amp.scale_tensor(scaler).item() == 4.0  # backed off once
    fused = build_optimizer(_optim_cfg("adam"), nn.Linear(2, 2).parameters())
    assert torch_amp.steps_without_sync(fused) == bool(fused.defaults.get("fused"))


class _Section:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _optim_cfg(name: str, momentum: float = 0.0):
    return _Section(optim=_Section(name=name, lr=0.1, weight_decay=0.0, momentum=momentum))


def test_fused_sgd_with_momentum_survives_a_skipped_first_step():
    """Fused SGD allocates its momentum buffers uninitialised on the first step; when the GradScaler
    skips that step, the pre-initialised zeros keep the next step equal to plain SGD's first."""
    torch.manual_seed(0)
    model = nn.Linear(8, 8)
    reference = nn.Linear(8, 8)
    reference.load_state_dict(model.state_dict())
    opt = build_optimizer(_optim_cfg("sgd", momentum=0.9), model.parameters())
    if not opt.defaults.get("fused"):
        pytest.skip("this torch has no fused SGD on the CPU; the CUDA path is covered by the gpu tests")
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    x = torch.randn(4, 8)
    for poison in (True, False):
        scaler.scale(model(x).square().mean()).backward()
        if poison:
            model.bias.grad[0] = float("inf")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    plain = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    reference(x).square().mean().backward()
    plain.step()
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_the_run_log_says_which_optimizer_kernel_and_gradient_reset_the_loop_takes():
    """A hand loop with torch's defaults (foreach SGD) answers a CPU A/B differently (docs/ab-results.md):
    the trainer's log names the kernel it took, so the difference has a name."""
    from amptui.trainer.optim import implementation_line

    opt = build_optimizer(_optim_cfg("sgd"), nn.Linear(2, 2).parameters())
    kernel = "fused kernel (torch's default is foreach)" if opt.defaults.get("fused") else "torch's default implementation"
    assert implementation_line(opt) == f"optimizer: SGD, {kernel}; gradients set to None after each step " \
                                       "(allocated again by the next backward)"
    plain = build_optimizer(_optim_cfg("adamw"), nn.Linear(2, 2).parameters(), fused=False)
    assert implementation_line(plain).startswith("optimizer: AdamW, torch's default implementation;")
