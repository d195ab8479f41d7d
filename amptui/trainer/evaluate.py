"""The validation pass at an epoch's end: the mean loss over the validation set, and for a
classifier (or a language model: per token) the share of predictions right. Under autocast, as the
training step's forward; every rank's sums are added before the division."""

from __future__ import annotations

import torch
from torch import nn

from amptui.trainer.dist import Dist
from amptui.trainer.state import TrainingState


@torch.no_grad()
def evaluate(s: TrainingState, dist: Dist) -> tuple[float | None, float | None]:
    """(validation loss, accuracy or None for a regression); (None, None) without validation data."""
    if s.val_data is None:
        return None, None
    s.forward.eval()
    classify = not isinstance(s.criterion, nn.MSELoss)
    totals = torch.zeros(3, device=s.device, dtype=torch.float64)  # loss sum, correct, count
    for x, y in s.val_data.batches(0):
        x = s.on_device(x)
        with s.autocast():
            out = s.forward(x)
            loss = s.criterion(out, y)
        totals[0] += loss.double() * y.shape[0]
        if classify:  # a classifier's (B, C) or a language model's (B, T, V): share of tokens right
            totals[1] += (out.argmax(-1) == y).reshape(y.shape[0], -1).double().mean(1).sum()
        totals[2] += y.shape[0]
    dist.all_sum(totals)
    loss_sum, correct, count = totals.tolist()
    s.faults.after_eval()
    s.forward.train()
    if not count:
        return None, None
    return loss_sum / count, (correct / count if classify else None)
