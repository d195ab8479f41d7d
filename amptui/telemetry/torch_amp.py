"""Every private torch AMP API amptui uses, in one place (tested in tests/unit/test_telemetry.py).

GradScaler offers no public way to learn, without a host sync, whether the step it just took
was skipped or what the scale now is; these three read its device tensors directly. If a torch
release renames them, this module is the one to mend.
"""

from __future__ import annotations

import torch


def found_inf(scaler: "torch.amp.GradScaler", optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """1.0 on the device when this iteration's gradients held inf/NaN (the step is skipped), else 0.0.

    Valid between scaler.step(optimizer) and scaler.update(): found_inf is per device; the sum is a
    device op, not a read."""
    per_device = list(scaler._found_inf_per_device(optimizer).values())
    flag = per_device[0] if len(per_device) == 1 else torch.stack([t.to(per_device[0].device) for t in per_device]).sum()
    return flag.reshape(()).clamp(max=1.0)


def scale_tensor(scaler: "torch.amp.GradScaler") -> torch.Tensor | None:
    """The scale as a device tensor (None before the first scaler.scale()); get_scale() would sync."""
    return scaler._get_scale_async()


def steps_without_sync(optimizer: torch.optim.Optimizer) -> bool:
    """True when GradScaler.step hands found_inf to the optimizer on the device (fused Adam/AdamW/SGD)
    instead of reading it on the host to decide whether to call optimizer.step()."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))
