"""Float8 numerics of torchao's float8 linears, on the steps `numerics.every` samples (the range
sampler, telemetry/numerics.py, hooks these in with its own and carries the values in its buffer:
no host read, no hook on other steps).

Per converted linear: the amax of its input, weight and grad-output; the share of their non-zero
values that round to zero once scaled into float8 (e4m3 for inputs and weights, and for
grad-outputs e5m2 under tensorwise, e4m3 under rowwise and MXFP8), computed at the recipe's scale
granularity (the tensor, each row, each block of 32); for MXFP8 also that share in its worst block
and its spread over the blocks (one block's outlier zeroes the rest of its 32 values, not the
tensor's: the overall share can hide it); and the SQNR in dB of the float8 GEMM's output against
the same GEMM in float32 on the same inputs: 10 log10(signal power / error power).
A model with no float8 linear (torchao never imported) has no probe at all. The float8 mode's
`numerics` entries (core/modes/float8.py `Sqnr` reads them back).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, cast

import torch
from torch import nn
from torch.nn import functional as F

from amptui.core.modes.float8 import MODE
from amptui.telemetry.fsdp_policy import local
from amptui.telemetry.modulehook import ModuleHook

ROWS = 3  # buffer rows (of 4 values) per float8 linear
# row 0: signal power, error power, input amax, weight amax
# row 1: input underflowed, input non-zero, weight underflowed, weight non-zero
# row 2: grad-output amax, underflowed, non-zero, (unused)
BLOCK_ROWS = 3  # and per MXFP8 linear: a row each for input, weight, grad-output (block_underflow's four)
BLOCK = 32      # MXFP8's scale block, along the last dimension
FLOAT8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
GRAD_FORMAT = {"tensorwise": "e5m2", "rowwise": "e4m3", "mxfp8": "e4m3"}
KEY = MODE.name  # its entries' field in a numerics record


def recipe_of(module: nn.Module) -> str | None:
    """The float8 recipe of a linear torchao converted; None for any other module."""
    if type(module).__name__ == "Float8Linear":
        config = getattr(module, "config", None)
        granularity = str(getattr(getattr(config, "cast_config_input", None), "scaling_granularity", ""))
        return "rowwise" if "AXISWISE" in granularity else "tensorwise"
    weight = getattr(module, "weight", None)
    if isinstance(module, nn.Linear) and type(weight).__name__.startswith("MXFP8Training"):
        return "mxfp8"
    return None


def float8_layers(model: nn.Module) -> list[tuple[str, nn.Module, str]]:
    """(name, module, recipe) of every float8 linear in `model`, in module order."""
    if "torchao" not in sys.modules:  # nothing can be converted yet: no walk to pay for
        return []
    return [(name, m, r) for name, m in model.named_modules() if (r := recipe_of(m)) is not None]


def attach(model: nn.Module) -> Float8Probe | None:
    layers = float8_layers(model)
    return Float8Probe(layers) if layers else None


def seen(model: nn.Module) -> str | None:
    """The recipe of the model's first float8 linear (a script's: amp.float8)."""
    layers = float8_layers(model)
    return layers[0][2] if layers else None


def plain(param: torch.Tensor) -> torch.Tensor:
    """A parameter's high-precision values as a plain tensor (MXFP8 wraps every parameter of its
    linears; FSDP2 shards are DTensors), detached."""
    t = param.detach()
    return local(getattr(t, "_data", t))


def whole_weight(current: torch.Tensor, resting: Any) -> torch.Tensor:
    """A linear's whole weight in high precision, in its forward. Under FSDP2's float8 all-gather
    (amp.float8 = "tensorwise" with dist.mode = "fsdp") the forward's weight is float8 already: the
    reference GEMM needs the weight before that rounding, so the high-precision shards are
    all-gathered again (a collective on sampled steps only; every rank runs the same hooks)."""
    if type(current).__name__ != "Float8TrainingTensor" or not hasattr(resting, "device_mesh"):
        return plain(current)
    from torch.distributed.tensor import DTensor

    shard = resting.to_local().detach()
    shard = getattr(shard, "_tensor", shard)  # torchao's WeightWithDynamicFloat8CastTensor holds it
    return DTensor.from_local(shard, resting.device_mesh, resting.placements, run_check=False,
                              shape=resting.shape, stride=resting.stride()).full_tensor()


def _dtype(fmt: str) -> torch.dtype:
    return torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2


def cast_masks(x: torch.Tensor, recipe: str, fmt: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(amax, the values that round to zero in float8, the non-zero values) of `x` scaled as the
    recipe scales it: one scale per tensor, per row, or per block of 32 along the last dimension
    (the masks are then shaped (rows, blocks, 32))."""
    top = FLOAT8_MAX[fmt]
    x = local(x.detach()).float().reshape(-1, x.shape[-1])
    amax = x.abs().amax()
    if recipe == "rowwise":
        peak = x.abs().amax(dim=-1, keepdim=True)
    elif recipe == "mxfp8" and x.shape[-1] % BLOCK == 0:
        x = x.reshape(x.shape[0], -1, BLOCK)
        peak = x.abs().amax(dim=-1, keepdim=True)
    else:
        peak = amax
    scale = top / peak.clamp(min=1e-30)
    q = (x * scale).clamp(-top, top).to(_dtype(fmt)).float()
    nonzero = x != 0
    return amax, (q == 0) & nonzero, nonzero


def block_underflow(zeroed: torch.Tensor, nonzero: torch.Tensor) -> torch.Tensor:
    """Per MXFP8 block (the masks' last dimension), the share of its non-zero values that rounded
    to zero: (the worst block's share, their sum, their sum of squares, blocks with a non-zero
    value), on the device; -1 for the worst when no block had one. Sums, so the calls of one step
    add up; the spread is read back from them (block_spread)."""
    if zeroed.dim() < 3:  # not blocked (the last dimension is no multiple of 32)
        return torch.tensor([-1.0, 0.0, 0.0, 0.0], device=zeroed.device)
    seen = nonzero.sum(dim=-1).float()
    counted = seen > 0
    share = torch.where(counted, zeroed.sum(dim=-1).float() / seen.clamp(min=1), torch.zeros_like(seen))
    worst = torch.where(counted, share, torch.full_like(share, -1.0)).amax()
    return torch.stack([worst, share.sum(), share.pow(2).sum(), counted.sum().float()])


class Float8Probe:
    """The float8 linears of one model; `hook` puts their hooks in for one sampled step."""

    key = KEY

    def __init__(self, layers: list[tuple[str, nn.Module, str]]):
        self.layers = layers
        # each layer's first row in the probe's part of the buffer (an MXFP8 one has BLOCK_ROWS more)
        self.first_rows = []
        row = 0
        for _, _, recipe in layers:
            self.first_rows.append(row)
            row += ROWS + (BLOCK_ROWS if recipe == "mxfp8" else 0)
        self.rows = row

    def hook(self, buffer: torch.Tensor, first_row: int, quiet: Callable[[], bool]) -> list[Any]:
        # each weight as it is between steps (under FSDP2: this rank's high-precision shard)
        return [module.register_forward_hook(ModuleHook(self._forward(buffer, first_row + row, recipe, quiet, module.weight)))
                for (_, module, recipe), row in zip(self.layers, self.first_rows, strict=True)]

    def _forward(self, buffer: torch.Tensor, row: int, recipe: str, quiet: Callable[[], bool], resting: Any):
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            if quiet() or not torch.is_grad_enabled() or not inputs or not isinstance(output, torch.Tensor):
                return
            x = inputs[0]
            weight = whole_weight(cast(torch.Tensor, module.weight), resting)
            with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
                bias = plain(cast(torch.Tensor, module.bias)).float() if module.bias is not None else None
                reference = F.linear(x.detach().float(), weight.float(), bias)
                error = reference - output.detach().float()
                xa, xz, xn = cast_masks(x, recipe, "e4m3")
                wa, wz, wn = cast_masks(weight, recipe, "e4m3")
                buffer[row, 0] += reference.pow(2).sum()
                buffer[row, 1] += error.pow(2).sum()
                buffer[row, 2] = torch.maximum(buffer[row, 2], xa)
                buffer[row, 3] = torch.maximum(buffer[row, 3], wa)
                buffer[row + 1] += torch.stack([xz.sum(), xn.sum(), wz.sum(), wn.sum()]).float()
                if recipe == "mxfp8":
                    add_blocks(buffer, row + ROWS, block_underflow(xz, xn))
                    add_blocks(buffer, row + ROWS + 1, block_underflow(wz, wn))
            if output.requires_grad:
                output.register_hook(self._backward(buffer, row + 2, recipe, quiet))
        return hook

    def _backward(self, buffer: torch.Tensor, row: int, recipe: str, quiet: Callable[[], bool]):
        def hook(grad: torch.Tensor) -> None:
            if quiet():
                return
            with torch.no_grad():
                ga, gz, gn = cast_masks(grad, recipe, GRAD_FORMAT[recipe])
                buffer[row, 0] = torch.maximum(buffer[row, 0], ga)
                buffer[row, 1] += gz.sum().float()
                buffer[row, 2] += gn.sum().float()
                if recipe == "mxfp8":
                    add_blocks(buffer, row + ROWS, block_underflow(gz, gn))  # row: the layer's third
        return hook

    def records(self, values: list[float]) -> list[dict[str, Any]]:
        """Each layer's record from its rows of the buffer, read back (values: the float8 rows, flat)."""
        out = []
        for (name, _, recipe), first in zip(self.layers, self.first_rows, strict=True):
            (signal, noise, x_amax, w_amax), (xu, xn, wu, wn), (g_amax, gu, gn, _) = (
                values[(first + r) * 4:(first + r + 1) * 4] for r in range(ROWS))
            tensors = {"input": _tensor("e4m3", x_amax, xu, xn), "weight": _tensor("e4m3", w_amax, wu, wn),
                       "grad_output": _tensor(GRAD_FORMAT[recipe], g_amax, gu, gn)}
            if recipe == "mxfp8":
                for r, tensor in enumerate(tensors.values()):
                    tensor.update(block_spread(values[(first + ROWS + r) * 4:(first + ROWS + r + 1) * 4]))
            out.append({"name": name, "recipe": recipe, "sqnr_db": sqnr_db(signal, noise), **tensors})
        return out


def add_blocks(buffer: torch.Tensor, row: int, blocks: torch.Tensor) -> None:
    """Fold one call's block_underflow into the step's row: the worst of the worst, the sums added."""
    buffer[row, 0] = torch.maximum(buffer[row, 0], blocks[0])
    buffer[row, 1:] += blocks[1:]


def block_spread(values: list[float]) -> dict[str, float | None]:
    """An MXFP8 tensor's `underflow_worst_block` (the highest share of a block's non-zero values
    that rounded to zero) and `underflow_block_spread` (the standard deviation of that share over
    its blocks), from its buffer row; None when no block held a non-zero value."""
    worst, total, squares, blocks = values
    if not blocks or not all(map(math.isfinite, values)):
        return {"underflow_worst_block": None, "underflow_block_spread": None}
    mean = total / blocks
    return {"underflow_worst_block": round(max(worst, 0.0), 6),
            "underflow_block_spread": round(math.sqrt(max(squares / blocks - mean * mean, 0.0)), 6)}


def sqnr_db(signal: float, noise: float) -> float | None:
    """10 log10(signal / noise), rounded; None when nothing was seen or a value is not finite."""
    if not (math.isfinite(signal) and math.isfinite(noise)) or signal <= 0:
        return None
    if noise <= 0:  # no error at all (every value exact in float8): JSON has no infinity
        return 300.0
    return round(10 * math.log10(signal / noise), 2)


def _tensor(fmt: str, amax: float, underflowed: float, nonzero: float) -> dict[str, Any]:
    """amax, the tensorwise scale (float8 max / amax: each row or block is scaled at least this
    much), the format, and the share of non-zero values that rounded to zero."""
    finite = math.isfinite(amax)
    return {"format": fmt, "amax": amax if finite else None,
            "scale": FLOAT8_MAX[fmt] / amax if finite and amax > 0 else None,
            "underflow": round(underflowed / nonzero, 6) if nonzero else None}
