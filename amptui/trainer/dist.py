"""The process group: torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE), the collectives the
loop needs, and the wrapper the loop calls the model through (DDP, DataParallel, torch.compile)."""

from __future__ import annotations

import contextlib
import os
from typing import cast

import torch
from torch import nn

from amptui.core.config.precision import Precision
from amptui.core.config.schema import RunConfig
from amptui.telemetry import ddp
from amptui.trainer import fsdp
from amptui.trainer.amp import Autocast
from amptui.trainer.layers import LayerScope
from amptui.trainer.models import compile_if_asked


class Dist:
    """torchrun's environment; a single process without it (every collective is then a no-op)."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.enabled = self.world_size > 1
        self.under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ

    def init(self, backend: str, always: bool = False) -> None:
        """The process group, when there are several ranks (or `always`: FSDP needs one, even alone)."""
        if self.enabled or (always and self.under_torchrun):
            torch.distributed.init_process_group(backend=backend)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return ddp.all_sum(tensor) if self.enabled else tensor

    def any(self, flag: bool, device: torch.device) -> bool:
        return ddp.any_rank(flag, device, self.world_size)

    def from_rank0(self, value: object) -> object:
        """Rank 0's `value` on every rank (a picklable object; the autopilot's decision): a collective."""
        if not self.enabled:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def close(self) -> None:
        if self.enabled and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class AutocastForward(nn.Module):
    """Runs the wrapped module's forward under autocast, in whatever thread calls it."""

    def __init__(self, module: nn.Module, autocast: Autocast):
        super().__init__()
        self.module, self.autocast = module, autocast

    def forward(self, *args, **kwargs):
        with self.autocast():
            return self.module(*args, **kwargs)


def no_sync(forward: nn.Module) -> contextlib.AbstractContextManager:
    """DDP's no_sync() on the module `parallelize` made under DDP (torch.compile's wrapper passes
    attributes through to it); FSDP2's gradient sync switched off."""
    if fsdp.is_sharded(forward):
        return fsdp.no_sync(forward)
    return cast(nn.parallel.DistributedDataParallel, forward).no_sync()


def parallelize(model: nn.Module, dist: Dist, device: torch.device, autocast: Autocast, run_cfg: RunConfig,
                mode: str, precision: Precision | None = None, scope: LayerScope | None = None) -> nn.Module:
    """The module the loop calls: DDP across ranks, DataParallel across this host's GPUs (`mode`
    "dp"), or the model itself; compiled when `run.compile` asks. Checkpoints keep the plain model.
    FSDP (`mode` "fsdp", with the run's `precision` as its policy) shards the model itself, in place."""
    forward = model
    if mode == "fsdp":  # in place: the model itself becomes the sharded module
        assert precision is not None and precision.fsdp_policy is not None, "FSDP needs its policy"
        return fsdp.shard(model, device, dist.world_size, precision, scope)
    if dist.enabled:
        ids = [device.index] if device.type == "cuda" else None
        forward = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    elif mode == "dp":
        # DataParallel runs each replica's forward in a thread of its own; autocast state is
        # per thread, so it is entered inside the replicas' forward, not only around the call.
        forward = nn.DataParallel(AutocastForward(model, autocast))
    return compile_if_asked(forward, run_cfg)
