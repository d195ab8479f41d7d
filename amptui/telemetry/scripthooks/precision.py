"""The precision a loop really trains in, from what it did: the autocast contexts it entered with
gradients on (device type, dtype), whether an enabled GradScaler scaled its loss, and an FSDP2
model's MixedPrecisionPolicy (`fully_shard(..., mp_policy=...)`), and what each mode's probe sees
in its models (telemetry/probes/: torchao's linears' recipe). The same answer for a script
under `amptui run --script` and for an `amptui.Monitor` without `config=`."""

from __future__ import annotations

from typing import Any

import torch

from amptui.core import modes
from amptui.telemetry import probes
from amptui.telemetry.fsdp_policy import first_policy


class AutocastSeen:
    """The (device type, dtype) of each enabled autocast entered while training, first first."""

    def __init__(self) -> None:
        self.entered: dict[tuple[str, str], int] = {}
        self._counted: dict[tuple[Any, Any], tuple[str, str]] = {}  # (device type, dtype) as given -> key

    def autocast_entered(self, device_type: str, dtype: torch.dtype | None) -> None:
        key = self._counted.get((device_type, dtype))
        if key is not None:  # every step enters the same autocast: no string work each time
            self.entered[key] += 1
            return
        if dtype is None:  # torch.autocast's own default for the device (float16 on CUDA, bfloat16 on the CPU)
            dtype = torch.get_autocast_dtype(device_type)
        name = str(dtype).removeprefix("torch.")
        key = (str(device_type), name)
        self.entered[key] = self.entered.get(key, 0) + 1
        self._counted[(device_type, dtype)] = key

    @property
    def first(self) -> tuple[str, str] | None:
        return next(iter(self.entered), None)


def precision_overrides(seen: AutocastSeen, scaler: Any | None) -> dict[str, Any]:
    """The preset keys (dotted) that say what the loop did: amp.autocast, amp.dtype,
    amp.grad_scaler, and the scaler's own settings when it has one."""
    out: dict[str, Any] = modes.detect(modes.LoopFacts(autocast=seen.first))
    enabled = scaler is not None and bool(scaler.is_enabled())
    out["amp.grad_scaler"] = enabled
    if scaler is not None and enabled:
        out.update({"amp.growth_factor": float(scaler.get_growth_factor()),
                    "amp.backoff_factor": float(scaler.get_backoff_factor()),
                    "amp.growth_interval": int(scaler.get_growth_interval())})
    return out


def loop_overrides(seen: AutocastSeen, scaler: Any | None, models: list[torch.nn.Module]) -> dict[str, Any]:
    """`precision_overrides`, and what every precision mode reads from the loop's models: for a
    model the loop sharded with FSDP2 its policy (dist.mode "fsdp"; a reduced param_dtype is the
    dtype it computes in, no autocast needed), the dtype its parameters are kept in, and what each
    mode's probe sees in them (the recipe of torchao's linears)."""
    facts = modes.LoopFacts(autocast=seen.first, fsdp_policy=first_policy(models), param_dtype=param_dtype(models),
                            seen=probes.seen(models))
    return {**precision_overrides(seen, scaler), **modes.detect(facts)}


def param_dtype(models: list[torch.nn.Module]) -> str | None:
    """The dtype of the first floating-point parameter of the loop's models (None: none has one)."""
    for model in models:
        for p in model.parameters():
            if p.is_floating_point():
                return str(p.dtype).removeprefix("torch.")
    return None
