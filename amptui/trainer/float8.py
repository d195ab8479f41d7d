"""amp.float8: torchao's float8 training on the model's linears (the float8 precision mode's
conversion, core/config/modes.py names it).

Which linears convert follows torchtitan: an nn.Linear whose in and out features divide by 16
(32 for MXFP8: a scale per 32 values), not the model's first or last linear (the embedding side
and the head are the most sensitive), none whose name contains an `amp.float8_skip` entry, and,
where the hardware really runs float8 GEMMs, none too small to gain (torchao's size thresholds,
measured on an H100). Where it has no float8 GEMM (a CPU, a GPU below compute capability 8.9;
MXFP8 below 10.0) torchao emulates: the values are rounded to float8 exactly as they would be, the
matmul runs in high precision. Numerics are real, speed is not; every linear that fits converts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config

EMULATED_NOTE = "emulated: numerics are real, speed is not"
ALIGN = {"tensorwise": 16, "rowwise": 16, "mxfp8": 32}
NATIVE_CAPABILITY = {"tensorwise": (8, 9), "rowwise": (8, 9), "mxfp8": (10, 0)}


def native(recipe: str, device: torch.device) -> bool:
    """Whether this device runs the recipe's float8 GEMMs in hardware."""
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= NATIVE_CAPABILITY[recipe]


def too_small(recipe: str, out_features: int, in_features: int) -> bool:
    """torchao's thresholds (float8_linear_utils' auto filters, measured on an H100): below them a
    float8 GEMM loses more to casting than it gains."""
    n, k = out_features, in_features
    if recipe == "rowwise":
        return n <= 2048 or k <= 1024 or (n <= 4096 and k <= 2048)
    return k <= 4096 and n <= 1024


def choose(model: nn.Module, recipe: str, skip: list[str], hardware: bool) -> tuple[list[str], dict[str, str]]:
    """(the linears to convert, {kept linear: why}), in module order."""
    linears = [(name, m) for name, m in model.named_modules() if type(m) is nn.Linear]
    chosen, kept = [], {}
    for i, (name, m) in enumerate(linears):
        if i == 0 or i == len(linears) - 1:
            kept[name] = "first linear" if i == 0 else "last linear"
        elif any(s and s in name for s in skip):
            kept[name] = "amp.float8_skip"
        elif m.in_features % ALIGN[recipe] or m.out_features % ALIGN[recipe]:
            kept[name] = f"features not divisible by {ALIGN[recipe]}"
        elif hardware and too_small(recipe, m.out_features, m.in_features):
            kept[name] = "GEMM too small to gain"
        else:
            chosen.append(name)
    return chosen, kept


def convert(model: nn.Module, precision: Precision, cfg: Config, device: torch.device) -> dict[str, Any]:
    """Swap the chosen linears for torchao's float8 ones, in place; returns what converted, for the
    start record's precision.float8 (recipe, converted, linears, kept, emulated)."""
    recipe = precision.float8
    hardware = native(recipe, device)
    chosen, kept = choose(model, recipe, list(cfg.amp.float8_skip), hardware)
    wanted = set(chosen)

    def chosen_only(module: nn.Module, fqn: str) -> bool:
        return fqn in wanted

    if wanted:
        if recipe == "mxfp8":
            _convert_mx(model, chosen_only, hardware)
        else:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training

            config = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=not hardware,
                                         enable_fsdp_float8_all_gather=gathered(precision))
            convert_to_float8_training(model, module_filter_fn=chosen_only, config=config)
    summary = {"recipe": recipe, "converted": len(chosen), "linears": len(chosen) + len(kept),
               "layers": chosen, "kept": kept, "emulated": not hardware}
    if gathered(precision):
        summary["fsdp_float8_all_gather"] = bool(wanted)
    return summary


def gathered(precision: Precision) -> bool:
    """torchtitan's first FSDP flag: under FSDP2 a tensorwise float8 weight is cast to float8 on its
    shard and all-gathered in float8 (half the bytes of bfloat16), not all-gathered and then cast."""
    return precision.fsdp_policy is not None and precision.float8 == "tensorwise"


def precompute_scales(model: nn.Module) -> None:
    """torchtitan's second flag, after each optimizer step of a float8 all-gather run: every
    float8 weight's amax in one all-reduce (not one per weight in the next forward), on the device."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    precompute_float8_dynamic_scale_for_fsdp(model)


def _convert_mx(model: nn.Module, chosen: Any, hardware: bool) -> None:
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    recipe = MXFP8TrainingRecipe.MXFP8_RCEIL if hardware else MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL
    quantize_(model, MXFP8TrainingOpConfig.from_recipe(recipe), filter_fn=chosen)
    for name, module in model.named_modules():
        if chosen(module, name):
            # torchao's MX linear sees the weight before autocast casts it: give it the input in the
            # weight's dtype (its own casts to MXFP8 follow), or the two differ under autocast
            module.register_forward_pre_hook(_input_like_weight)


def _input_like_weight(module: nn.Module, args: tuple) -> tuple:
    x, *rest = args
    return (x.to(module.weight.dtype), *rest)


def summary_words(summary: dict[str, Any]) -> str:
    """"float8 rowwise: 12 of 14 linears" (+ the ones kept, + emulated)."""
    words = f"float8 {summary['recipe']}: {summary['converted']} of {summary['linears']} linears"
    if summary["kept"]:
        words += " (kept in high precision: " + ", ".join(f"{n} ({why})" for n, why in summary["kept"].items()) + ")"
    return words


def converted_note(summary: dict[str, Any], device: torch.device) -> str:
    """The run's warning line: what converted, and, emulated, that its speed means nothing."""
    words = summary_words(summary)
    if not summary["emulated"]:
        return words
    where = "this CPU" if device.type == "cpu" else f"this GPU (compute capability {'.'.join(map(str, torch.cuda.get_device_capability(device)))})"
    return f"{words}; {EMULATED_NOTE} ({where} has no float8 GEMM, so torchao emulates it)"
