"""FSDP2 for `dist.mode = "fsdp"`: each block and the root wrapped with `fully_shard` on an
explicit device mesh, with the run's precision as a `MixedPrecisionPolicy`.

The policy replaces autocast (no autocast context is entered: the policy applies): parameters are
all-gathered and computed in param_dtype, gradients reduce-scattered in reduce_dtype, and each rank
keeps its float32 shard of the parameters and of the optimizer state. The root's outputs come back
in float32, so the loss is computed in float32 as autocast would.

A float16 policy needs the ordinary `torch.amp.GradScaler`: its gradients are DTensors, and
torch's DTensor dispatch all-reduces the scaler's found_inf (max over the mesh) inside unscale_
(`found_inf_reduce_handler`, torch >= 2.13 at least), so every rank skips the same steps.

Checkpoints hold the full (unsharded) state, gathered to rank 0 on the CPU: the same last.pt as
every other run, independent of the world size it was written with (see docs/distributed.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from amptui.core.config.precision import Precision
from amptui.core.errors import UserError

# the policy reader lives in telemetry, where the script hooks and the Monitor use it too
from amptui.telemetry.fsdp_policy import is_sharded as is_sharded
from amptui.telemetry.fsdp_policy import local
from amptui.telemetry.fsdp_policy import policy_of as policy_of
from amptui.trainer.layers import LayerScope

BLOCK_ATTRS = ("blocks", "layers", "h")  # where a model keeps its transformer blocks (first found wins)


def find_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's blocks: the children of its `blocks` (or `layers`, `h`) ModuleList/Sequential,
    also one level down (`model.transformer.h`). Empty when it has none."""
    for owner in (model, *model.children()):
        for name in BLOCK_ATTRS:
            found = getattr(owner, name, None)
            if isinstance(found, (nn.ModuleList, nn.Sequential)) and len(found):
                return list(found)
    return []


def _api():
    """fully_shard, MixedPrecisionPolicy and init_device_mesh, or a UserError on a torch without FSDP2."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        raise UserError(f"dist.mode = \"fsdp\" needs FSDP2 (torch.distributed.fsdp.fully_shard), which torch "
                        f"{torch.__version__} lacks; install torch >= 2.13 or use dist.mode=ddp") from None
    return fully_shard, MixedPrecisionPolicy, init_device_mesh


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def mp_policies(precision: Precision) -> tuple[Any, Any]:
    """(the blocks' policy, the root's policy): the root's also casts its outputs to float32."""
    _, MixedPrecisionPolicy, _ = _api()
    named = precision.fsdp_policy
    if named is None:
        raise ValueError("not an FSDP precision")
    param = _dtype(named["param_dtype"])
    kwargs = dict(param_dtype=None if param == torch.float32 else param, reduce_dtype=_dtype(named["reduce_dtype"]))
    return MixedPrecisionPolicy(**kwargs), MixedPrecisionPolicy(**kwargs, output_dtype=torch.float32)


def shard(model: nn.Module, device: torch.device, world_size: int, precision: Precision,
          scope: LayerScope | None = None) -> nn.Module:
    """fully_shard each block, then the root, on a 1-D mesh of the run's device type (made
    explicitly: left to itself FSDP picks the accelerator, even for a CPU run). In place; returns
    the model (now an FSDPModule, its parameters DTensor shards). [amp.layers]: each module a rule
    puts in another compute dtype is sharded first, with that dtype as its policy's param_dtype."""
    fully_shard, _, init_device_mesh = _api()
    blocks = find_blocks(model)
    if not blocks:
        raise UserError(f"dist.mode = \"fsdp\": the model ({type(model).__name__}) has no blocks to shard (a "
                        f"`{'`, `'.join(BLOCK_ATTRS)}` ModuleList); give it one, or use dist.mode=ddp")
    mesh = init_device_mesh(device.type, (world_size,))
    block_policy, root_policy = mp_policies(precision)
    _, MixedPrecisionPolicy, _ = _api()
    for module, dtype in _ruled_modules(model, scope):  # float32 named too: its inputs are cast up to it
        own = MixedPrecisionPolicy(param_dtype=_dtype(dtype), reduce_dtype=_dtype((precision.fsdp_policy or {}).get("reduce_dtype") or dtype))
        fully_shard(module, mesh=mesh, mp_policy=own)
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=block_policy)
    fully_shard(model, mesh=mesh, mp_policy=root_policy)
    return model


def _ruled_modules(model: nn.Module, scope: LayerScope | None) -> list[tuple[nn.Module, str]]:
    """The modules [amp.layers] puts in another compute dtype than their parent's, deepest first
    (fully_shard goes bottom-up), each with its dtype."""
    found = [d for d in (scope.decisions(model) if scope is not None else [])  # the model's own: its root policy
             if d.name and any(True for _ in d.module.parameters())]
    return [(d.module, d.dtype) for d in sorted(found, key=lambda d: -d.name.count("."))]


@contextlib.contextmanager
def no_sync(model: nn.Module) -> Iterator[None]:
    """Micro-batches before the last one: gradients accumulate unsharded, reduce-scattered once."""
    model.set_requires_gradient_sync(False)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)  # type: ignore[operator]


def plain(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value as a plain tensor (clip_grad_norm_'s total norm over sharded grads)."""
    full = getattr(tensor, "full_tensor", None)
    return full() if callable(full) else tensor


# --- checkpoints: the full state, gathered to rank 0 ------------------------------------------------

def _options(**kwargs):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kwargs)


def gather_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """(model, optimizer) full state dicts, on the CPU, on rank 0 ({} on the others). A collective:
    every rank calls it. The optimizer's is keyed by parameter name (torch.distributed.checkpoint's form)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    return get_state_dict(model, optimizer, options=_options(cpu_offload=True))


def load_state(model: nn.Module, optimizer: torch.optim.Optimizer, model_state: dict, optim_state: dict) -> None:
    """Every rank holds the full state read from last.pt and keeps its own shard of it."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    if optim_state.get("state"):
        materialize_optimizer_state(optimizer)
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state,
                       options=_options())
        return
    # a stateless optimizer (SGD without momentum): torch's loader has nothing to place; its hyperparameters
    set_model_state_dict(model, model_state, options=_options())
    for group, saved in zip(optimizer.param_groups, optim_state.get("param_groups", []), strict=False):
        group.update({k: v for k, v in saved.items() if k != "params"})


def materialize_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Give a fresh optimizer its (sharded) state tensors, which torch's full-state loader needs to
    place the saved ones: one step on zero gradients at lr 0 (parameters unchanged: also AdamW's
    decay is lr-scaled); the loaded state then replaces it all, step counts included."""
    if optimizer.state:
        return
    lrs = [group["lr"] for group in optimizer.param_groups]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for group in optimizer.param_groups:
        group["lr"] = 0.0
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for group, lr in zip(optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)


# --- what a rank holds ---------------------------------------------------------------------------

# float32 state tensors per parameter the presets' optimizers keep (Adam's two moments, SGD's momentum)
STATES_PER_PARAM = {"adamw": 2, "adam": 2, "sgd": 1}


def shard_bytes(model: nn.Module, optim_name: str, momentum: float) -> dict[str, int]:
    """This rank's share of the training state, in bytes, for the start record: its parameter
    shards, the optimizer state those shards get once it steps (same shape, float32), and the
    whole model's parameters (what DDP would keep on every rank, and as much again in gradients)."""
    params = sum(local(p).numel() * local(p).element_size() for p in model.parameters())
    full = sum(p.numel() * local(p).element_size() for p in model.parameters())
    per_param = STATES_PER_PARAM.get(optim_name, 0) if optim_name != "sgd" or momentum else 0
    return {"params_bytes": params, "optimizer_bytes": params * per_param, "model_params_bytes": full}


def replica_bytes(model: nn.Module, optim_name: str, momentum: float) -> dict[str, int] | None:
    """An unsharded run's start record `replica` (DDP, one process): shard_bytes of the whole model,
    which each rank keeps. None while a lazy module's parameters have no shape yet."""
    from torch.nn.parameter import is_lazy

    if any(is_lazy(p) for p in model.parameters()):
        return None
    return shard_bytes(model, optim_name, momentum)
