"""The non-finite step pinned on the code that made it (issue 51.5-6): every module call is checked on the
replayed step, containers included, and the first whose output is non-finite while its inputs are finite
is named (the innermost; a reused module by its call and the module it was called in), with what the
check saw; for a script on its first non-finite step record with no setting; advice follows the dtype.
In process, tiny models on the CPU (float16 autocast works there)."""

from __future__ import annotations

import torch
from torch import nn

from amptui.telemetry.alarms import HeadroomAlarms
from amptui.telemetry.nonfinite import trace_first_nonfinite


class Boom(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x) * 1e4  # functional code inside a module, as attention scores are


class WithBoom(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.boom, self.head = nn.Linear(8, 16), Boom(), nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.boom(torch.relu(self.inp(x)))))


class Inline(nn.Module):
    """The overflow in the model's own forward, between two children."""

    def __init__(self):
        super().__init__()
        self.inp, self.head = nn.Linear(8, 16), nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.inp(x) * 1e5)


class Shared(nn.Module):
    """One linear called twice: its second call overflows."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(16, 16)
        with torch.no_grad():
            self.shared.weight.copy_(torch.eye(16) * 200)
            self.shared.bias.zero_()

    def forward(self, x):
        return self.shared(self.shared(x)).sum(dim=1)


def trace(model: nn.Module, x: torch.Tensor) -> dict | None:
    def replay() -> None:
        with torch.autocast("cpu", dtype=torch.float16):
            model(x).float().pow(2).mean().backward()
    return trace_first_nonfinite(model, replay, "float16", "cpu")


def test_functional_code_inside_a_module_is_pinned_on_that_module_not_the_next():
    torch.manual_seed(0)
    first = trace(WithBoom(), torch.randn(32, 8) * 40)
    assert first is not None and first["module"] == "boom" and first["where"] == "forward", first
    assert first["after"] == "boom.lin" and first["weights_finite"] and 0 < first["bad"] <= first["of"] == 512
    assert first["value"] > 65504 and "from finite inputs, in its own code after boom.lin" in first["checked"]


def test_an_overflow_in_the_models_own_forward_names_the_model():
    torch.manual_seed(0)
    first = trace(Inline(), torch.rand(4, 8) + 1)
    assert first is not None and first["module"] == "model" and first["after"] == "inp", first


def test_a_reused_module_is_named_by_its_call_and_where_it_was_called():
    first = trace(Shared(), torch.ones(4, 16) * 2)  # 2 -> 400 (fits) -> 80,000 (does not)
    assert first is not None and first["module"] == "shared" and (first["call"], first["calls"]) == (2, 2), first
    assert "shared (call 2 of 2, in model)" in first["text"]


def test_a_float32_divergence_gets_no_bfloat16_advice():
    """Issue 51.6: float32 (and bfloat16, float32's range) overflowing is a divergence: the learning rate."""
    for dtype in ("float32", "bfloat16"):
        alarms = HeadroomAlarms(dtype)
        said = alarms._advice("0", float("-inf"), 12)
        assert "bfloat16" not in said.replace(f"overflowing {dtype}", "") and "learning rate" in said, said
    assert "bfloat16" in HeadroomAlarms("float16")._advice("0", float("-inf"), 12)


def test_the_kept_inputs_of_a_packed_sequence_come_back_as_one():
    from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

    from amptui.telemetry.scripthooks.replaycause import LastForward

    packed = pack_padded_sequence(torch.ones(3, 2, 4), [3, 2])
    kept = LastForward()
    kept.keep((packed,), {"hidden": None})
    (again,), kwargs = kept.get()
    assert isinstance(again, PackedSequence) and again.data is packed.data and kwargs == {"hidden": None}
    del packed, again
    assert kept.get() is None  # held weakly: the loop let its batch go
