"""`data.name = "text"`: byte-level language-model batches from a text file or folder.

The corpus (core.prepare.textcorpus: `data.path`, or Python's standard library when empty) is read once,
split into train and validation bytes and kept on the training device as uint8. A batch is
`batch_size` windows of `model.block_size + 1` bytes at random offsets: inputs are the first
block_size bytes, targets the same window shifted by one (next-byte prediction, vocabulary 256).
Offsets are drawn on the device, deterministically per (seed, split, rank, epoch, batch), so a
resumed run sees the batches it had not seen yet; no per-sample CPU work, no copy per batch.
An epoch is `data.train_samples` windows (validation: `data.val_samples`, the same every time).
"""

from __future__ import annotations

import torch

from amptui.core.config.values import Config
from amptui.core.prepare import textcorpus
from amptui.trainer.devicebatches import DeviceBatches


class TextBatches(DeviceBatches):
    def __init__(self, corpus: torch.Tensor, cfg: Config, rank: int, world_size: int, device: torch.device,
                 split: str = "train"):
        super().__init__(cfg, rank, world_size, device, split)
        self.block_size = cfg.model.block_size
        self.data = corpus.to(device)
        self.offsets = torch.arange(self.block_size + 1, device=device)

    def batch(self, epoch: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.seeded(epoch, index)
        starts = torch.randint(len(self.data) - self.block_size, (n, 1), generator=self.generator,
                               device=self.device)
        windows = self.data[starts + self.offsets].long()  # (n, block_size + 1)
        return windows[:, :-1], windows[:, 1:]


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
