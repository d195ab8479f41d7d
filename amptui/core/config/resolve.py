"""Deciding a config's device-dependent "auto" values, once for every way a run starts: amptui's
launcher (core/prepare/preflight.py, for this machine) and `amptui.Monitor` (for the device the user's
model is on).

`amp.dtype = "auto"` means "what is fast and safe here": where the machine layer says the device's
auto dtype is slow (emulated bfloat16 on a CPU, `slow` below), automatic precision falls back to
float32 (autocast off, no GradScaler) and `auto_fallback_note` says why and how to force AMP. An
explicit dtype is always obeyed."""

from __future__ import annotations

from typing import Any, Mapping

from amptui.core.config.precision import Precision, auto_dtype
from amptui.core.config.values import Config


def falls_back(cfg: Config, device_type: str, slow: Mapping[str, str] | None) -> str | None:
    """The auto dtype this config would autocast to, when it is slow here (None: no fallback).
    Only automatic precision falls back: amp.dtype = "auto" with autocast on and no GradScaler asked
    for by name."""
    amp = cfg.amp
    if not slow or amp.dtype != "auto" or not amp.autocast or amp.grad_scaler is True:
        return None
    dtype = auto_dtype(device_type)
    return dtype if dtype in slow else None


def wants_speed_facts(cfg: Config, device_type: str) -> bool:
    """Whether `auto_overrides` would use the slow-dtype facts (the launcher measures only then)."""
    return falls_back(cfg, device_type, {auto_dtype(device_type): "?"}) is not None


def auto_fallback_note(cfg: Config, device_type: str, slow: Mapping[str, str] | None) -> str | None:
    """One line: why this run uses float32 instead of its auto dtype, and how to force AMP."""
    dtype = falls_back(cfg, device_type, slow)
    if dtype is None or slow is None:
        return None
    return (f"amp.dtype auto: float32 (autocast off), as {dtype} is slow on this {device_type} "
            f"({slow[dtype]}); force AMP with --set amp.dtype={dtype}")


def auto_overrides(cfg: Config, device_type: str, slow: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Dotted keys that decide run.device, amp.dtype, amp.grad_scaler and dist.backend for
    `device_type` ("cpu" or "cuda"); `slow`: {dtype: why} of the dtypes slow on it (see above)."""
    fallback = falls_back(cfg, device_type, slow)
    precision = Precision(False, fallback, False) if fallback else Precision.from_config(cfg, device_type)
    out: dict[str, Any] = {"run.device": device_type, "amp.dtype": precision.dtype,
                           "amp.grad_scaler": precision.scaler}
    if fallback:
        out["amp.autocast"] = False
    if cfg.dist.backend == "auto":
        out["dist.backend"] = "nccl" if device_type == "cuda" else "gloo"
    return out
