"""The process group: torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE), the collectives the
loop needs, and the wrapper the loop calls the model through (DDP, DataParallel, torch.compile)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch
from torch import nn

from amptui.core.config.schema import RunConfig
from amptui.telemetry import ddp
from amptui.trainer.models import compile_if_asked

if TYPE_CHECKING:
    from amptui.trainer.state import Autocast


class Dist:
    """torchrun's environment; a single process without it (every collective is then a no-op)."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.enabled = self.world_size > 1
        self.under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ

    def init(self, backend: str) -> None:
        if self.enabled:
            torch.distributed.init_process_group(backend=backend)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return ddp.all_sum(tensor) if self.enabled else tensor

    def any(self, flag: bool, device: torch.device) -> bool:
        return ddp.any_rank(flag, device, self.world_size)

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


def parallelize(model: nn.Module, dist: Dist, device: torch.device, autocast: Autocast, run_cfg: RunConfig,
                mode: str) -> nn.Module:
    """The module the loop calls: DDP across ranks, DataParallel across this host's GPUs (`mode`
    "dp"), or the model itself; compiled when `run.compile` asks. Checkpoints keep the plain model."""
    forward = model
    if dist.enabled:
        ids = [device.index] if device.type == "cuda" else None
        forward = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    elif mode == "dp":
        # DataParallel runs each replica's forward in a thread of its own; autocast state is
        # per thread, so it is entered inside the replicas' forward, not only around the call.
        forward = nn.DataParallel(AutocastForward(model, autocast))
    return compile_if_asked(forward, run_cfg)
