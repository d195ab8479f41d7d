"""[amp.layers] on a built model: which precision each module runs in (`LayerScope`), decided once;
`LayerScope.decisions` yields the modules that compute in a dtype of their own, which each consumer
applies: the autocast each enters around its own forward (`apply_autocast`), or under FSDP the
policy each is sharded with (trainer/fsdp.py).

A module a rule matches runs in the rule's variant, its children with it unless a rule matches
them too; the rest runs in the run's precision (core/config/layers.py). A layer variant's autocast
dtype ("fp32": none, the module's inputs cast to float32) is entered in that module's forward; a
mode's conversion converts the layers inside it (its runtime reads `LayerScope.variant_of`) and says
which it converted (`Conversion.variants`), which is how the layers are labelled and counted here.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from amptui.core.config import layers as rules_of
from amptui.core.config.dtypes import DTYPES, FULL
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError


def check_matches(cfg: Any) -> None:
    """Before a run starts: every [amp.layers] pattern matches a module of the model the config
    builds (on the meta device: no memory, no weights), else a ConfigError, exit 2, nothing made.
    A user's model.factory is not run here (it is user code: the trainer says it at its start)."""
    rules = tuple(cfg.amp.layers.items()) if cfg.amp.layers else ()
    if not rules or cfg.model.factory or cfg.run.script:
        return
    from amptui.trainer.models import build_model

    try:
        with torch.device("meta"):
            model = build_model(cfg.model)
    except Exception:  # noqa: BLE001 -- a model that cannot be built so is left to the trainer to say
        return
    missed = rules_of.unmatched((name for name, _ in model.named_modules()), rules)
    if missed:
        raise ConfigError(unmatched_words(model, missed))


def unmatched_words(model: nn.Module, missed: list[str]) -> str:
    names = [name for name, _ in model.named_modules()]
    shown = ", ".join(n for n in names[1:9] if n) + (", ..." if len(names) > 9 else "")
    return (f"{rules_of.KEY}: {rules_of.named(missed)} {'match' if len(missed) > 1 else 'matches'} no module of "
            f"this model ({type(model).__name__}: {shown}); patterns match names as model.named_modules() gives them "
            "(fnmatch: \"blocks.*.mlp.fc\")")


@dataclass(frozen=True)
class LayerDecision:
    """One module that computes in a dtype of its own ([amp.layers]): each consumer applies it its way."""

    name: str
    module: nn.Module
    dtype: str  # FULL (float32): no autocast inside, its inputs cast up


@dataclass(frozen=True)
class LayerScope:
    """What [amp.layers] decided for one model, by qualified module name."""

    run: Precision
    own: dict[str, str] = field(default_factory=dict)     # modules a rule matched -> its variant
    inherited: dict[str, str] = field(default_factory=dict)  # every module under a rule -> the variant in effect

    @classmethod
    def of(cls, model: nn.Module, run: Precision) -> "LayerScope":
        """The rules matched against `model.named_modules()`; a UserError for a pattern that
        matches no module (a typo would leave its layers in the run's precision unsaid)."""
        names = [name for name, _ in model.named_modules()]
        missed = rules_of.unmatched(names, run.layers)
        if missed:
            raise ConfigError(unmatched_words(model, missed))
        own: dict[str, str] = {}
        inherited: dict[str, str] = {}
        for name in names:  # parents before children
            variant = rules_of.rule_for(name, run.layers)
            if variant is not None:
                own[name] = variant
            parent = name.rpartition(".")[0] if name else None
            effective = variant or (inherited.get(parent) if parent is not None else None)
            if effective is not None:
                inherited[name] = effective
        return cls(run, own, inherited)

    def variant_of(self, name: str) -> str | None:
        """The layer variant module `name` runs in; None: the run's precision."""
        return self.inherited.get(name)

    def labels(self, model: nn.Module, converted: dict[str, str]) -> dict[str, str]:
        """Each layer (a module holding parameters of its own) -> the variant it computes in: the
        variant a mode's conversion gave it (`converted`), else its autocast dtype's ("fp32", "bf16")."""
        return {name: converted.get(name) or _dtype_variant(self.compute_dtype(name))
                for name, module in model.named_modules() if any(True for _ in module.parameters(recurse=False))}

    def dtypes(self, model: nn.Module) -> dict[str, str]:
        """Module -> the dtype it computes in, for every module where that is not the run's."""
        return {name: dtype for name, _ in model.named_modules()
                if (dtype := self.compute_dtype(name)) != self.run_dtype}

    def compute_dtype(self, name: str) -> str:
        variant = self.variant_of(name)
        if variant is None:
            return self.run_dtype
        return Precision.from_variant(variant).autocast_dtype or FULL

    def decisions(self, model: nn.Module) -> list[LayerDecision]:
        """[amp.layers] applied, in one place: each module a rule names whose compute dtype differs
        from its parent's (the model's own: from the run's), in model order, with that dtype."""
        out = []
        for name, module in model.named_modules():
            if name in self.own:
                mine = self.compute_dtype(name)
                if mine != (self.compute_dtype(name.rpartition(".")[0]) if name else self.run_dtype):
                    out.append(LayerDecision(name, module, mine))
        return out

    def unruled_labels(self, model: nn.Module, converts: dict[str, str]) -> dict[str, str]:
        """Each layer's variant without the rules: the variant the run's own conversion gives the
        layers it converts (`converts`: its mode's runtime says which), else the run's compute dtype's."""
        base = _dtype_variant(self.run_dtype)
        return {name: converts.get(name, base)
                for name, module in model.named_modules() if any(True for _ in module.parameters(recurse=False))}

    @property
    def run_dtype(self) -> str:
        p = self.run
        return p.autocast_dtype or (p.fsdp_policy or {}).get("param_dtype") or FULL

    def mix(self, model: nn.Module, unruled: dict[str, str], converted: dict[str, str]) -> tuple[tuple[str, int], ...]:
        """(variant, layers) for the layers a rule put in another precision than `unruled` (each
        layer's variant without the rules), in model order."""
        counts: Counter[str] = Counter()
        for name, label in self.labels(model, converted).items():
            if name in self.inherited and label != unruled.get(name):
                counts[label] += 1
        return tuple(counts.items())


def _dtype_variant(dtype: str) -> str:
    return DTYPES[dtype].short if dtype in DTYPES else "fp32"


def apply_autocast(model: nn.Module, scope: LayerScope, device: torch.device) -> list[str]:
    """Wrap the forward of each module whose compute dtype differs from its parent's in an
    autocast of its own (in place); returns their names."""
    for decision in (decisions := scope.decisions(model)):
        decision.module.forward = _in_dtype(decision.module.forward, device.type, decision.dtype)
    return [d.name for d in decisions]


def _in_dtype(forward: Any, device_type: str, dtype: str) -> Any:
    """`forward` under autocast to `dtype`; float32: autocast off inside, floating inputs cast up
    (an op outside autocast does not mix a bfloat16 input with float32 weights)."""
    full = dtype == FULL

    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        if full:
            args = tuple(_up(a) for a in args)
            kwargs = {k: _up(v) for k, v in kwargs.items()}
            with torch.autocast(device_type, enabled=False):
                return forward(*args, **kwargs)
        with torch.autocast(device_type, dtype=getattr(torch, dtype)):
            return forward(*args, **kwargs)

    return run


def _up(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float32:
        return value.float()
    return value
