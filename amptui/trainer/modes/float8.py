"""amp.float8: torchao's float8 training on the model's linears (the float8 precision mode's
conversion; the mode itself: amptui/core/modes/float8.py).

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
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.core.modes.float8 import RECIPES as FLOAT8_RECIPES
from amptui.core.modes.float8 import recipe_of as run_recipe
from amptui.trainer.modes.base import Conversion, ModeRuntime, register

if TYPE_CHECKING:
    from amptui.trainer.layers import LayerScope

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


@dataclass(frozen=True)
class Float8Conversion(Conversion):
    """What a float8 conversion did: the start record's precision.float8 (`record()`) and the run's
    warning line (`note`)."""

    recipe: str                  # the run's amp.float8 ("off": only [amp.layers] asked for float8)
    layers: dict[str, str]       # converted linear -> its recipe, in module order
    kept: dict[str, str]         # a linear float8 was asked for but kept in high precision -> why
    emulated: bool               # no float8 GEMM on this device: torchao emulates (numerics real, speed not)
    all_gather: bool = False     # FSDP2 all-gathers tensorwise weights in float8: scales precomputed each step
    bias_after: tuple[str, ...] = ()  # MXFP8 linears whose bias amptui adds after torchao's GEMM (which drops it)

    def variants(self) -> dict[str, str]:
        return {name: FLOAT8_RECIPES[recipe] for name, recipe in self.layers.items()}

    @property
    def converted(self) -> int:
        return len(self.layers)

    @property
    def headline(self) -> str:
        """"float8 rowwise: 12 of 14 linears"; with [amp.layers]' recipes "float8 (2 rowwise, 1 mxfp8): ..."."""
        recipes = list(dict.fromkeys(self.layers.values()))
        if recipes and recipes != [self.recipe]:
            counts = ", ".join(f"{sum(1 for r in self.layers.values() if r == each)} {each}" for each in recipes)
            return f"float8 ({counts}): {self.converted} of {self.linears} linears"
        return f"float8 {self.recipe}: {self.converted} of {self.linears} linears"

    @property
    def linears(self) -> int:
        """The linears float8 was asked for: converted or kept."""
        return len(self.layers) + len(self.kept)

    def note(self, device: torch.device) -> str:
        return converted_note(self, device)

    def record(self) -> dict[str, Any]:
        """recipe, converted, linears, layers (names), kept, emulated (+ recipes when [amp.layers]
        mixes them; fsdp_float8_all_gather under FSDP)."""
        out: dict[str, Any] = {"recipe": self.recipe, "converted": self.converted, "linears": self.linears,
                               "layers": list(self.layers), "kept": dict(self.kept), "emulated": self.emulated,
                               "headline": self.headline}
        if set(self.layers.values()) != {self.recipe} and self.layers:
            out["recipes"] = dict(self.layers)
        if self.all_gather:
            out["fsdp_float8_all_gather"] = True
        if self.bias_after:
            out["bias_added_after_gemm"] = {"layers": list(self.bias_after), "why": MX_BIAS_WHY}
        return out


@register("float8")
class Float8Runtime(ModeRuntime):
    """The float8 mode in the trainer: converts the linears (amp.float8 and [amp.layers]' float8
    variants) and, under FSDP's float8 all-gather, precomputes the scales after each step."""

    record_key = "float8"

    def convert(self, model: nn.Module, precision: Precision, cfg: Config, device: torch.device,
                scope: LayerScope | None) -> Float8Conversion:
        return convert(model, precision, cfg, device, scope)

    def converts(self, model: nn.Module, precision: Precision, cfg: Config, device: torch.device) -> dict[str, str]:
        if run_recipe(precision) == "off":
            return {}
        recipe = run_recipe(precision)
        chosen, _ = choose(model, recipe, list(cfg.amp.float8_skip), native(recipe, device))
        return {name: FLOAT8_RECIPES[recipe] for name, recipe in chosen.items()}

    def after_optimizer_step(self, model: nn.Module, done: Conversion | None) -> None:
        if isinstance(done, Float8Conversion) and done.all_gather:
            precompute_scales(model)  # the weights' float8 scales for the next all-gather


def ruled_recipe(scope: LayerScope, name: str) -> str | None:
    """A linear's float8 recipe by its [amp.layers] rule: "off" when a rule keeps it out of float8,
    None when no rule names it (the run's amp.float8 decides)."""
    variant = scope.variant_of(name)
    return None if variant is None else run_recipe(Precision.from_variant(variant))


def choose(model: nn.Module, recipe: str, skip: list[str], hardware: bool,
           scope: LayerScope | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """({linear to convert: its recipe}, {kept linear: why}), in module order. A linear an
    [amp.layers] rule names takes the rule's recipe (chosen by the user: only the alignment can keep
    it); the others the run's `recipe` ("off": none) by torchtitan's rules."""
    linears = [(name, m) for name, m in model.named_modules() if type(m) is nn.Linear]
    chosen: dict[str, str] = {}
    kept: dict[str, str] = {}
    for i, (name, m) in enumerate(linears):
        ruled = ruled_recipe(scope, name) if scope is not None else None
        wanted = ruled if ruled is not None else recipe
        if wanted == "off":
            if recipe != "off" and ruled is not None:
                kept[name] = f"amp.layers: {scope.variant_of(name)}" if scope is not None else "amp.layers"
            continue
        if ruled is None and (i == 0 or i == len(linears) - 1):
            kept[name] = "first linear" if i == 0 else "last linear"
        elif ruled is None and any(s and s in name for s in skip):
            kept[name] = "amp.float8_skip"
        elif m.in_features % ALIGN[wanted] or m.out_features % ALIGN[wanted]:
            kept[name] = f"features not divisible by {ALIGN[wanted]}"
        elif ruled is None and hardware and too_small(wanted, m.out_features, m.in_features):
            kept[name] = "GEMM too small to gain"
        else:
            chosen[name] = wanted
    return chosen, kept


def convert(model: nn.Module, precision: Precision, cfg: Config, device: torch.device,
            scope: LayerScope | None = None) -> Float8Conversion:
    """Swap the chosen linears for torchao's float8 ones, each with its recipe, in place."""
    recipe = run_recipe(precision)
    natives = {r: native(r, device) for r in ALIGN}
    chosen, kept = choose(model, recipe, list(cfg.amp.float8_skip), natives.get(recipe, False), scope)
    sharded = precision.fsdp_policy is not None
    bias_after: list[str] = []
    for r in dict.fromkeys(chosen.values()):
        wanted = {name for name, each in chosen.items() if each == r}
        hardware = natives[r]

        def only(module: nn.Module, fqn: str, wanted: set[str] = wanted) -> bool:
            return fqn in wanted

        if r == "mxfp8":
            bias_after += _convert_mx(model, only, hardware)
        else:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training

            config = dataclasses.replace(Float8LinearConfig.from_recipe_name(r), emulate=not hardware,
                                         enable_fsdp_float8_all_gather=sharded and r == "tensorwise")
            convert_to_float8_training(model, module_filter_fn=only, config=config)
    emulated = not all(natives[r] for r in set(chosen.values()) | ({recipe} - {"off"}))
    return Float8Conversion(recipe, chosen, kept, emulated,
                            all_gather=sharded and "tensorwise" in chosen.values(), bias_after=tuple(bias_after))


def precompute_scales(model: nn.Module) -> None:
    """torchtitan's second flag, after each optimizer step of a float8 all-gather run: every
    float8 weight's amax in one all-reduce (not one per weight in the next forward), on the device."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    precompute_float8_dynamic_scale_for_fsdp(model)


def _convert_mx(model: nn.Module, chosen: Any, hardware: bool) -> list[str]:
    """Convert the chosen linears to MXFP8; the names of those whose bias is added after the GEMM."""
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    recipe = MXFP8TrainingRecipe.MXFP8_RCEIL if hardware else MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL
    quantize_(model, MXFP8TrainingOpConfig.from_recipe(recipe), filter_fn=chosen)
    biased = []
    for name, module in model.named_modules():
        if chosen(module, name):
            # torchao's MX linear sees the weight before autocast casts it: give it the input in the
            # weight's dtype (its own casts to MXFP8 follow), or the two differ under autocast
            module.register_forward_pre_hook(_input_like_weight)
            if getattr(module, "bias", None) is not None and mx_drops_bias():
                module.register_forward_hook(_add_bias)
                biased.append(name)
    return biased


MX_BIAS_WHY = ("torchao's MXFP8 training linear computes x @ W.T and ignores the bias; amptui adds it "
               "after the GEMM in the output's dtype, as torchao's float8 linears do")


@functools.cache
def mx_drops_bias() -> bool:
    """Whether torchao's MXFP8 linear leaves the bias out (0.18 does: its F.linear override calls
    the scaled GEMM on input and weight only). Asked once, on a 32 x 32 linear on the CPU, so a
    torchao that adds it is not given the bias twice."""
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    linear = nn.Linear(32, 32)
    with torch.no_grad():
        linear.weight.zero_()
        linear.bias.fill_(1.0)
    holder = nn.Sequential(linear)
    quantize_(holder, MXFP8TrainingOpConfig.from_recipe(MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL),
              filter_fn=lambda mod, _: isinstance(mod, nn.Linear))
    with torch.no_grad():
        out = holder(torch.ones(32, 32))
    return bool(out.abs().max().item() < 0.5)


def _add_bias(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    bias = module.bias
    assert isinstance(bias, torch.Tensor)
    return output + bias.to(output.dtype)


def _input_like_weight(module: nn.Module, args: tuple) -> tuple:
    x, *rest = args
    return (x.to(module.weight.dtype), *rest)


def summary_words(done: Float8Conversion) -> str:
    """"float8 rowwise: 12 of 14 linears" (+ the ones kept); with [amp.layers]' recipes, each's count."""
    words = done.headline
    if done.kept:
        words += " (kept in high precision: " + ", ".join(f"{n} ({why})" for n, why in done.kept.items()) + ")"
    return words


def converted_note(done: Float8Conversion, device: torch.device) -> str:
    """The run's warning line: what converted, and, emulated, that its speed means nothing."""
    words = summary_words(done)
    if not done.emulated:
        return words
    where = "this CPU" if device.type == "cpu" else f"this GPU (compute capability {'.'.join(map(str, torch.cuda.get_device_capability(device)))})"
    return f"{words}; {EMULATED_NOTE} ({where} has no float8 GEMM, so torchao emulates it)"
