"""The script's model(s): the modules that own the optimizers' parameters.

`script_models` is the one place that knows them (the per-model hooks, the overflowing
parameters' names, and any later sampler that attaches to a script's model use it): of the
modules whose forward the script called, those holding optimizer parameters, outermost only
(a DistributedDataParallel wrapper rather than the module inside it).
"""

from __future__ import annotations

from typing import Iterable

import torch

from amptui.telemetry.scripthooks.varnames import variable_names


def optimizer_params(optimizers: Iterable[torch.optim.Optimizer]) -> list[torch.nn.Parameter]:
    seen: set[int] = set()
    out = []
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def script_models(candidates: Iterable[torch.nn.Module],
                  optimizers: Iterable[torch.optim.Optimizer]) -> list[torch.nn.Module]:
    """Of `candidates` (modules whose forward ran), the outermost ones owning optimizer
    parameters, in the order they were first seen."""
    wanted = {id(p) for p in optimizer_params(optimizers)}
    owners: list[torch.nn.Module] = []
    for module in dict.fromkeys(candidates):  # unique, in order
        if any(id(p) in wanted for p in module.parameters()):
            owners.append(module)
    inner = {id(sub) for m in owners for sub in m.modules() if sub is not m}
    return [m for m in owners if id(m) not in inner]


class NamedParams:
    """The optimizers' parameters, named by the model that owns them (what OverflowTracer reads):
    one model: its own names; several: prefixed with the script's variable for each model
    (`generator.0.weight`, varnames.py), else with the model's class name."""

    def __init__(self, models: list[torch.nn.Module], optimizers: Iterable[torch.optim.Optimizer]):
        wanted = {id(p) for p in optimizer_params(optimizers)}
        self.pairs: list[tuple[str, torch.nn.Parameter]] = []
        named: set[int] = set()
        prefixes = _prefixes(models)
        for model, prefix in zip(models, prefixes, strict=True):
            for name, p in model.named_parameters():
                if id(p) in wanted and id(p) not in named:
                    named.add(id(p))
                    self.pairs.append((prefix + name.removeprefix("module."), p))
        for index, p in enumerate(optimizer_params(optimizers)):
            if id(p) not in named:  # a parameter no module we saw owns
                self.pairs.append((f"param[{index}]", p))

    def named_parameters(self):
        return iter(self.pairs)


def _prefixes(models: list[torch.nn.Module]) -> list[str]:
    if len(models) <= 1:
        return [""] * len(models)
    names = [type(m).__name__ if not hasattr(m, "module") else type(m.module).__name__ for m in models]
    by_class = []
    for i, name in enumerate(names):
        by_class.append(f"{name}{i}." if names.count(name) > 1 else f"{name}.")
    own = [f"{v}." if v else c for v, c in zip(variable_names(models), by_class, strict=True)]
    return own if len(set(own)) == len(own) else by_class  # two models one name: the classes tell them apart


def batch_size(args: tuple, kwargs: dict | None = None) -> int | None:
    """dim 0 of the first tensor a forward receives (shape only: no device read)."""
    if args and isinstance(args[0], torch.Tensor) and args[0].dim() >= 1:  # the usual call: model(x)
        return int(args[0].shape[0])
    for value in (*args, *(kwargs or {}).values()):
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            return int(value.shape[0])
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor) and value[0].dim() >= 1:
            return int(value[0].shape[0])
    return None
