"""Reading an FSDP2 model's mixed-precision policy (torch only): the trainer names its own sharded
model with it, and the any-script hooks and the Monitor name a script's own `fully_shard(model,
mp_policy=...)`. A model is only ever sharded after torch.distributed.fsdp was imported, so a run
that never imported it pays nothing here.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn


def is_sharded(module: nn.Module) -> bool:
    if "torch.distributed.fsdp" not in sys.modules:  # nothing can be sharded yet: no import to pay for
        return False
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(module, FSDPModule)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank (a plain tensor is its own)."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def policy_of(model: nn.Module) -> dict[str, str] | None:
    """The FSDP2 policy a model was sharded with, in dtype names (param / reduce / sharded / output),
    read from its first FSDP module; None when nothing in it is sharded."""
    fsdp_modules = [m for m in model.modules() if is_sharded(m)]
    if not fsdp_modules:
        return None
    policy = _policy_attr(fsdp_modules[0])  # the outermost: its output_dtype is what the loss sees
    sharded = next((local(p).dtype for p in model.parameters()), torch.float32)

    def name(dtype: torch.dtype | None, fallback: torch.dtype) -> str:
        return str(dtype or fallback).removeprefix("torch.")

    param = getattr(policy, "param_dtype", None)
    return {"param_dtype": name(param, sharded), "reduce_dtype": name(getattr(policy, "reduce_dtype", None), param or sharded),
            "sharded_dtype": name(sharded, sharded), "output_dtype": name(getattr(policy, "output_dtype", None), param or sharded)}


def first_policy(models: list[nn.Module]) -> dict[str, str] | None:
    """The policy of the first of `models` that is FSDP2-sharded; None when none is."""
    return next((p for p in (policy_of(m) for m in models) if p is not None), None)


def _policy_attr(module: nn.Module) -> Any:
    """The MixedPrecisionPolicy fully_shard stored (torch keeps it on the module's FSDP state; there
    is no public getter in torch 2.13-2.14)."""
    try:
        from torch.distributed.fsdp import fully_shard

        state = fully_shard.state(module)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - another layout in another torch: name no policy rather than fail
        return None
    return getattr(state, "_mp_policy", None)
