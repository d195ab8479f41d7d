"""Unit tests of the trainer's AMP bookkeeping with a real GradScaler on the CPU (float16, tiny)."""

import math

import torch
from torch import nn

from amptui.telemetry import torch_amp
from amptui.telemetry.meter import StepMeter
from amptui.telemetry.scaler import OverflowTracer, scaler_events


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def amp_step(model, opt, scaler, meter, poison=None):
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    if poison is not None:
        dict(model.named_parameters())[poison].grad.view(-1)[0] = float("inf")
    scaler.step(opt)
    found = torch_amp.found_inf(scaler, opt).item()
    names = overflow_names(model) if found else []
    scaler.update()
    opt.zero_grad()
    meter.add_loss(loss)
    meter.optimizer_step(torch_amp.scale_tensor(scaler), None)
    return bool(found), names


def overflow_names(model):
    """What a backoff record names: the tracer's on-device counts, read as a flush would."""
    tracer = OverflowTracer(model)
    counts = tracer.count()
    return tracer.named(1, {0: counts.tolist()})[1]


def test_an_injected_inf_is_skipped_and_backs_off_and_clean_steps_grow():
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    meter = StepMeter(torch.device("cpu"))
    before = [p.detach().clone() for p in model.parameters()]
    skipped, names = amp_step(model, opt, scaler, meter, poison="2.weight")
    assert skipped and names == ["2.weight"]  # only the poisoned layer is blamed
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "a skipped step changes nothing"
    for _ in range(2):
        assert amp_step(model, opt, scaler, meter) == (False, [])
    window = meter.flush()
    assert window.steps == 3 and window.scales == [512.0, 512.0, 1024.0]
    assert math.isfinite(window.loss)
    events, last = scaler_events(1, 1024.0, window.scales)
    assert events == [
        {"step": 1, "event": "backoff", "old_scale": 1024.0, "new_scale": 512.0, "overflow": []},
        {"step": 3, "event": "growth", "old_scale": 512.0, "new_scale": 1024.0},
    ]
    assert last == 1024.0


def test_overflow_attribution_ranks_the_worst_parameter_first():
    model = tiny_model()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    model[0].weight.grad[:3] = float("inf")    # 3 rows x 8 = 24 values
    model[2].bias.grad[0] = float("nan")       # 1 value
    assert overflow_names(model) == ["0.weight", "2.bias"]


def test_meter_reads_the_device_once_per_window():
    meter = StepMeter(torch.device("cpu"))
    for value in (1.0, 2.0, 3.0):
        meter.add_loss(torch.tensor(value))
        meter.optimizer_step(None, torch.tensor(value * 10))
    window = meter.flush()
    assert (window.steps, window.loss, window.scales, window.grad_norm) == (3, 2.0, [], 30.0)
    assert meter.flush().steps == 0  # the window starts over


def test_a_non_finite_loss_names_its_own_step_when_an_earlier_step_had_no_loss():
    """A script's step whose backward had no scalar loss adds none: the window's losses are paired
    with their steps, so step 8's NaN is said at step 8 (and blamed on step 8's module), not step 7."""
    from amptui.telemetry.tally import loss_source, nonfinite_at

    meter = StepMeter(torch.device("cpu"))
    for loss in (1.0, None, 2.0, float("nan"), 3.0):  # steps 5-9; step 6 recorded no loss
        if loss is not None:
            meter.add_step_loss(torch.tensor(loss))
        meter.optimizer_step(None, None)
    window = meter.flush()
    assert window.steps == 5 and math.isnan(window.loss)
    assert nonfinite_at(window, 5) == "at step 8"
    assert loss_source(window, 5, {7: {"module": "a"}, 8: {"module": "b"}}) == {"module": "b"}
