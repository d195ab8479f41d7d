"""Batches made on the training device a batch at a time, the part SyntheticBatches (images) and
TextBatches (byte windows) share: each rank's share of an epoch, and a generator seeded per
(seed, split, rank, epoch, batch), so a run resumed mid-epoch draws exactly the batches it had
not seen yet, with no per-sample CPU work and no memory held per sample."""

from __future__ import annotations

import math
from typing import Any, Iterator

import torch

from amptui.core.config.values import Config


class DeviceBatches:
    """A subclass draws batch `index` of `epoch` in `batch`, from `self.generator` after
    `seeded(epoch, index)`."""

    def __init__(self, cfg: Config, rank: int, world_size: int, device: torch.device, split: str = "train"):
        n = cfg.data.train_samples if split == "train" else cfg.data.val_samples
        self.num_samples = math.ceil(n / world_size)  # each rank's share, as a DistributedSampler's
        self.batch_size, self.device = cfg.data.batch_size, device
        self.seed = cfg.run.seed * 1_000_003 + (0 if split == "train" else 500_000_000) + rank * 10_007
        self.generator = torch.Generator(device=device)

    @property
    def batches_per_epoch(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)

    def seeded(self, epoch: int, index: int) -> int:
        """Seed the generator for batch `index` of `epoch`; its size (an epoch's last may be short)."""
        self.generator.manual_seed((self.seed * 7_919 + epoch * 1_000_033 + index) % 2**63)
        return min(self.batch_size, self.num_samples - index * self.batch_size)

    def batch(self, epoch: int, index: int) -> Any:
        raise NotImplementedError

    def batches(self, epoch: int, start: int = 0) -> Iterator:
        return (self.batch(epoch, b) for b in range(start, self.batches_per_epoch))
