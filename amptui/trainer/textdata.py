"""`data.name = "text"`: byte-level language-model batches from a text file or folder.

The corpus (core.textcorpus: `data.path`, or Python's standard library when empty) is read once,
split into train and validation bytes and kept on the training device as uint8. A batch is
`batch_size` windows of `model.block_size + 1` bytes at random offsets: inputs are the first
block_size bytes, targets the same window shifted by one (next-byte prediction, vocabulary 256).
Offsets are drawn on the device, deterministically per (seed, split, rank, epoch, batch), so a
resumed run sees the batches it had not seen yet; no per-sample CPU work, no copy per batch.
An epoch is `data.train_samples` windows (validation: `data.val_samples`, the same every time).
"""

from __future__ import annotations

import math
from typing import Iterator

import torch

from amptui.core import textcorpus
from amptui.core.config.values import Config


class TextBatches:
    def __init__(self, corpus: torch.Tensor, cfg: Config, rank: int, world_size: int, device: torch.device,
                 split: str = "train"):
        n = cfg.data.train_samples if split == "train" else cfg.data.val_samples
        self.num_samples = math.ceil(n / world_size)
        self.batch_size, self.block_size = cfg.data.batch_size, cfg.model.block_size
        self.data, self.device = corpus.to(device), device
        self.seed = cfg.run.seed * 1_000_003 + (0 if split == "train" else 500_000_000) + rank * 10_007
        self.generator = torch.Generator(device=device)
        self.offsets = torch.arange(self.block_size + 1, device=device)

    @property
    def batches_per_epoch(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)

    def batch(self, epoch: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = min(self.batch_size, self.num_samples - index * self.batch_size)
        self.generator.manual_seed((self.seed * 7_919 + epoch * 1_000_033 + index) % 2**63)
        starts = torch.randint(len(self.data) - self.block_size, (n, 1), generator=self.generator,
                               device=self.device)
        windows = self.data[starts + self.offsets].long()  # (n, block_size + 1)
        return windows[:, :-1], windows[:, 1:]

    def batches(self, epoch: int, start: int = 0) -> Iterator:
        return (self.batch(epoch, b) for b in range(start, self.batches_per_epoch))


def build_text_batches(cfg: Config, rank: int, world_size: int,
                       device: torch.device) -> tuple[TextBatches, TextBatches | None]:
    """(train, validation or None when data.val_samples = 0) batches of the run's corpus."""
    raw = textcorpus.read_corpus(textcorpus.corpus_files(cfg.data.path))
    train, val = textcorpus.split(raw, cfg.model.block_size + 1)

    def as_tensor(part: bytes) -> torch.Tensor:
        return torch.frombuffer(bytearray(part), dtype=torch.uint8)

    train_batches = TextBatches(as_tensor(train), cfg, rank, world_size, device, "train")
    val_batches = TextBatches(as_tensor(val), cfg, rank, world_size, device, "val") if cfg.data.val_samples else None
    return train_batches, val_batches
