"""`amptui plan`'s probe: on the steps `numerics.plan_every` samples, every linear's GEMM is run
again on that step's own tensors in each precision a plan could give it, and compared with float32.

On a sampled step a forward hook on each nn.Linear keeps a copy of its input and weight (its
first call of the step; later calls are only counted) and a hook on its output keeps the gradient
flowing back. After the optimizer step (`step_done`) the hooks come out and, per linear:

- the float32 shadow: y = x W^T, grad input = dY W, grad weight = dY^T x, all in float32;
- bf16: the inputs rounded to bfloat16, float32 accumulation, the output rounded (as a GPU's
  bf16 GEMM does): its relative error and SQNR against float32;
- fp16: range headroom (log2 bits from the forward's and the gradients' abs max to 65,504) and the
  share of inputs, weights and output gradients below float16's smallest normal;
- each float8 recipe of torchao (tensorwise `fp8`, rowwise `fp8-rowwise`, `mxfp8`), run through
  torchao itself (emulated where the device has no float8 GEMM: the rounding is real), from
  bfloat16 copies of the tensors as under bf16 autocast (float32 where bfloat16 is slow here):
  output SQNR,
  grad-input and grad-weight SQNR, and the share of input/weight/grad-output values that round to
  zero at the recipe's scale granularity (telemetry/probes/float8.py's masks), for MXFP8 also its
  worst 32-value block.

Biases are left out of every GEMM: each recipe adds them in high precision after its GEMM
(MXFP8's by amptui, trainer/modes/float8.py, as torchao 0.18's MXFP8 linear drops them), so all compare alike. A step that is not
sampled runs no hook. The sampled step's work is paid on that step only (the Recorder keeps it
out of the step clock); the figures are read back once, as a `plan_sample` record.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import torch
from torch import nn

from amptui.core.config.dtypes import DTYPES, wide_dtype
from amptui.core.modes.float8 import RECIPES as FLOAT8_RECIPES
from amptui.core.numerics import headroom_bits
from amptui.machine.dtype_speed import slow_dtypes
from amptui.telemetry.modulehook import ModuleHook
from amptui.telemetry.numerics import unwrap
from amptui.telemetry.probes.float8 import GRAD_FORMAT, block_spread, block_underflow, cast_masks, sqnr_db

FP16 = DTYPES["float16"]
ALIGN = {"tensorwise": 16, "rowwise": 16, "mxfp8": 32}  # torchao's float8 GEMMs need features that divide


@dataclass
class Captured:
    """One linear's tensors on the sampled step (copies: the optimizer changes the weight in place)."""

    order: int
    x: torch.Tensor
    weight: torch.Tensor
    grad: torch.Tensor | None = None
    calls: int = 1


@dataclass
class PlanProbe:
    """Every nn.Linear of `model`; `prepare`/`step_done` around each optimizer step."""

    model: nn.Module
    every: int
    layers: list[tuple[str, nn.Module]] = field(init=False)
    captured: dict[str, Captured] | None = field(default=None, init=False)
    scale: float = field(default=1.0, init=False)
    _handles: list[Any] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.layers = [(name, m) for name, m in unwrap(self.model).named_modules() if isinstance(m, nn.Linear)]

    def due(self, step: int) -> bool:
        return self.every > 0 and bool(self.layers) and step % self.every == 0

    def prepare(self, step: int, scale: float | None = None) -> None:
        """Before optimizer step `step` (1-based): hook the linears if it is sampled. `scale`: the
        GradScaler's scale this step's backward runs at (gradients are divided by it)."""
        if self.captured is not None or not self.due(step):
            return
        self.captured, self.scale = {}, float(scale or 1.0)
        for name, module in self.layers:
            self._handles.append(module.register_forward_hook(ModuleHook(self._forward(name))))

    def _forward(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            seen = self.captured
            if seen is None or not torch.is_grad_enabled() or not inputs or not isinstance(output, torch.Tensor):
                return  # evaluation (no grad) is not the step
            if name in seen:
                seen[name].calls += 1
                return
            x = inputs[0].detach()
            entry = seen[name] = Captured(len(seen), x.reshape(-1, x.shape[-1]).clone(),
                                          cast(torch.Tensor, module.weight).detach().clone())
            if output.requires_grad:
                output.register_hook(lambda g: setattr(entry, "grad", g.detach().reshape(-1, g.shape[-1]).clone())
                                     if entry.grad is None else None)
        return hook

    def step_done(self) -> list[dict[str, Any]] | None:
        """After the optimizer step: the hooks come out; each captured linear's figures (None when
        this step was not sampled or no linear ran)."""
        seen, self.captured = self.captured, None
        self.cancel()
        if not seen:
            return None
        device = next(iter(seen.values())).x.device
        wide = wide_dtype()  # the figures' high-precision reference: bfloat16 unless it is slow here
        high = torch.float32 if wide in slow_dtypes(device.type) else getattr(torch, wide)
        with torch.autocast(device.type, enabled=False):
            return [dict(name=name, **figures(c, self.scale, high)) for name, c in
                    sorted(seen.items(), key=lambda item: item[1].order)]

    def cancel(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def figures(c: Captured, scale: float, high: torch.dtype = torch.float32) -> dict[str, Any]:
    """A captured linear's shape and every precision's figures (`high`: the float8 recipes'
    high-precision dtype, what they cast from and return)."""
    x, w = c.x.float(), c.weight.float()
    m, k = x.shape
    n = w.shape[0]
    out: dict[str, Any] = {"order": c.order, "m": m, "k": k, "n": n, "calls": c.calls}
    with torch.no_grad():
        y = x @ w.t()
        grad = c.grad.float() / scale if c.grad is not None else None
        grads = (grad @ w, grad.t() @ x) if grad is not None else None
        out["bf16"] = rounded_gemm(x, w, y, torch.bfloat16)
        out["fp16"] = {**fp16_range(x, w, y, grad, grads), **rounded_gemm(x, w, y, torch.float16)}
    for recipe, key in FLOAT8_RECIPES.items():
        out[key] = float8_figures(recipe, x, w, y, grad, grads, high)
    return out


def rounded_gemm(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, dtype: torch.dtype) -> dict[str, Any]:
    """The GEMM with inputs and output rounded to `dtype`, float32 accumulation: its error."""
    q = (x.to(dtype).float() @ w.to(dtype).float().t()).to(dtype).float()
    signal, noise = y.pow(2).sum().item(), (q - y).pow(2).sum().item()
    rel = math.sqrt(noise / signal) if signal > 0 and math.isfinite(noise) else None
    return {"rel_error": _round(rel), "sqnr_db": sqnr_db(signal, noise)}


def fp16_range(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, grad: torch.Tensor | None,
               grads: tuple[torch.Tensor, torch.Tensor] | None) -> dict[str, Any]:
    """float16's range headroom (forward: input, weight, output; backward: the three gradients)
    and the shares of values under its smallest normal (before any loss scaling)."""
    top = FP16.max_finite
    forward = max(t.abs().amax().item() for t in (x, w, y))
    backward = max(t.abs().amax().item() for t in (grad, *grads)) if grad is not None and grads else None
    return {"headroom_forward": headroom_bits(forward, top),
            "headroom_grad": headroom_bits(backward, top) if backward is not None else None,
            "underflow": {"input": _small_share(x), "weight": _small_share(w),
                          "grad_output": _small_share(grad) if grad is not None else None}}


def _small_share(t: torch.Tensor) -> float | None:
    nonzero = t != 0
    seen = int(nonzero.sum())
    return round(int(((t.abs() < FP16.smallest_normal) & nonzero).sum()) / seen, 6) if seen else None


def float8_figures(recipe: str, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, grad: torch.Tensor | None,
                   grads: tuple[torch.Tensor, torch.Tensor] | None, high: torch.dtype = torch.float32) -> dict[str, Any]:
    """One torchao float8 recipe on the captured tensors: SQNR of the output and of both
    gradients against float32, and the underflow shares; {"runs": False, "why": ...} when the
    recipe cannot take this linear."""
    k, n = x.shape[1], w.shape[0]
    if k % ALIGN[recipe] or n % ALIGN[recipe]:
        return {"runs": False, "why": f"features not divisible by {ALIGN[recipe]}"}
    try:
        shadow = _shadow(recipe, w.to(high))
        # a copy: a float32 capture is `high` already, and the recipes after the first must not add to its .grad
        xin = x.detach().to(high, copy=True).requires_grad_(grad is not None)
        out = shadow(xin)
        if grad is not None:
            out.backward(grad.to(high))
    except Exception as exc:  # torchao refuses this shape or device: said, not fatal to the plan
        return {"runs": False, "why": f"torchao: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    result: dict[str, Any] = {"runs": True, "sqnr_db": _sqnr(y, out.detach().float())}
    if grad is not None and grads is not None and xin.grad is not None:
        weight_grad = _plain_grad(shadow)
        result["grad_input_sqnr_db"] = _sqnr(grads[0], xin.grad.float())
        result["grad_weight_sqnr_db"] = _sqnr(grads[1], weight_grad) if weight_grad is not None else None
    result["underflow"] = {}
    for role, tensor, fmt in (("input", x, "e4m3"), ("weight", w, "e4m3"), ("grad_output", grad, GRAD_FORMAT[recipe])):
        if tensor is None:
            result["underflow"][role] = None
            continue
        _, zeroed, nonzero = cast_masks(tensor, recipe, fmt)
        seen = int(nonzero.sum())
        result["underflow"][role] = round(int(zeroed.sum()) / seen, 6) if seen else None
        if recipe == "mxfp8":
            worst = block_spread([float(v) for v in block_underflow(zeroed, nonzero).tolist()])
            result.setdefault("worst_block", {})[role] = worst["underflow_worst_block"]
    return result


def _shadow(recipe: str, w: torch.Tensor) -> nn.Module:
    """A bias-free linear holding `w`, converted by torchao to the recipe, emulated unless the
    device runs float8 GEMMs (the trainer's float8 module decides that the same way)."""
    linear = nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        linear.weight.copy_(w)
    emulate = not _native(recipe, w.device)
    if recipe == "mxfp8":
        from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
        from torchao.quantization import quantize_

        holder = nn.Sequential(linear)
        mx = MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL if emulate else MXFP8TrainingRecipe.MXFP8_RCEIL
        quantize_(holder, MXFP8TrainingOpConfig.from_recipe(mx), filter_fn=lambda mod, _: isinstance(mod, nn.Linear))
        return holder[0]
    from torchao.float8 import Float8LinearConfig
    from torchao.float8.float8_linear import Float8Linear

    config = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
    return Float8Linear.from_float(copy.deepcopy(linear), config=config)


def _native(recipe: str, device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= ((10, 0) if recipe == "mxfp8" else (8, 9))


def _plain_grad(module: nn.Module) -> torch.Tensor | None:
    grad = cast(torch.Tensor, module.weight).grad
    if grad is None:
        return None
    return cast(torch.Tensor, getattr(grad, "_data", grad)).float()


def _sqnr(reference: torch.Tensor, value: torch.Tensor) -> float | None:
    return sqnr_db(reference.pow(2).sum().item(), (reference - value).pow(2).sum().item())


def _round(value: float | None) -> float | None:
    return float(f"{value:.4g}") if value is not None and math.isfinite(value) else None
