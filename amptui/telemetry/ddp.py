"""What the ranks of a torch.distributed run agree on, the same way in amptui's trainer and in
`amptui.Monitor`: sums of small tensors, and "does any rank say so" for a stop flag (one small
all-reduce, at a record boundary)."""

from __future__ import annotations

import torch


def initialized(world_size: int) -> bool:
    """Is there a process group to agree through?"""
    dist = torch.distributed
    return world_size > 1 and dist.is_available() and dist.is_initialized()


def all_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum over the ranks, in place."""
    torch.distributed.all_reduce(tensor)
    return tensor


def any_rank(flag: bool, device: torch.device, world_size: int) -> bool:
    """True when `flag` is true on any rank (every rank must call it)."""
    if not initialized(world_size):
        return flag
    return bool(all_sum(torch.tensor([1.0 if flag else 0.0], device=device)).item() > 0)
