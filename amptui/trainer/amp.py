"""`Autocast`: the run's precision as a context for the forward pass, shared by the training state
and the parallel wrappers that must enter it inside their replicas."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from amptui.core.config.precision import Precision


@dataclass(frozen=True)
class Autocast:
    """`with state.autocast():` -- the forward pass and the loss in the run's precision (a no-op
    context when autocast is off)."""

    device_type: str
    dtype: torch.dtype
    enabled: bool

    @classmethod
    def of(cls, precision: Precision, device: torch.device) -> "Autocast":
        # the mode decides (an FSDP policy computes in its param_dtype itself: autocast on top of it stays off)
        dtype = precision.autocast_dtype
        return cls(device.type, getattr(torch, dtype or precision.dtype), dtype is not None)

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the forward pass's matmuls run in: float32 without autocast."""
        return self.dtype if self.enabled else torch.float32

    def __call__(self) -> torch.autocast:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)
