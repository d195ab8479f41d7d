"""Deciding a config's device-dependent "auto" values, once for every way a run starts: amptui's
launcher (core/preflight.py, for this machine) and `amptui.Monitor` (for the device the user's
model is on)."""

from __future__ import annotations

from typing import Any

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config


def auto_overrides(cfg: Config, device_type: str) -> dict[str, Any]:
    """Dotted keys that decide run.device, amp.dtype, amp.grad_scaler and dist.backend for
    `device_type` ("cpu" or "cuda")."""
    precision = Precision.from_config(cfg, device_type)
    out: dict[str, Any] = {"run.device": device_type, "amp.dtype": precision.dtype,
                           "amp.grad_scaler": precision.scaler}
    if cfg.dist.backend == "auto":
        out["dist.backend"] = "nccl" if device_type == "cuda" else "gloo"
    return out
