"""TF32: whether float32 matmuls (cuBLAS) and convolutions (cuDNN) may run on TF32 tensor cores.

It decides what an "fp32" baseline measures on an Ampere-or-later GPU, so `amp.tf32` sets it and
the `start` record, compare, tune and doctor say it. torch has two APIs for it:

- torch 2.9 and later: `torch.backends.cuda.matmul.fp32_precision` and
  `torch.backends.cudnn.conv.fp32_precision` ("tf32", "ieee", or "none": inherit from the parent,
  `torch.backends.cudnn.fp32_precision`, then `torch.backends.fp32_precision`);
- before: `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`.

amptui sets the new one where it exists (torch refuses to *read* the old flags once the new API
has set a different value: "mix of the legacy and new APIs"), the old one elsewhere, and reads the
state back through whichever answers, so a user's script that mixed them cannot make it fail.
torch's defaults: matmuls in IEEE float32, cuDNN convolutions in TF32.
"""

from __future__ import annotations

from typing import Any

TF32_MIN_CAPABILITY = (8, 0)  # Ampere: the first GPUs with TF32 tensor cores


def has_new_api(torch) -> bool:
    try:
        return isinstance(torch.backends.cuda.matmul.fp32_precision, str)
    except (AttributeError, RuntimeError):
        return False


def apply(setting: bool | str, torch=None) -> None:
    """`amp.tf32`: True / False set matmuls and cuDNN convolutions alike; "auto" leaves torch's
    defaults (and whatever the process set before) untouched."""
    if setting == "auto":
        return
    if torch is None:
        import torch
    on = bool(setting)
    if has_new_api(torch):
        mode = "tf32" if on else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def _inherited(*levels: Any) -> str:
    """The first of fp32_precision values that is not "none" (inherit), else "none"."""
    for value in levels:
        if value != "none":
            return str(value)
    return "none"


def _legacy(read) -> bool | None:
    try:
        return bool(read())
    except (AttributeError, RuntimeError):  # mixed APIs: torch refuses to answer
        return None


def state(torch=None, device: Any = None) -> dict[str, Any]:
    """{"matmul": bool, "cudnn": bool, "api": "fp32_precision" | "allow_tf32", "supported": bool
    or None}: the effective permissions (what a float32 matmul / convolution may use), and
    whether `device` (a torch.device; None: not asked) has TF32 tensor cores at all."""
    if torch is None:
        import torch
    b = torch.backends
    if has_new_api(torch):
        generic = getattr(b, "fp32_precision", "none")
        matmul = _inherited(b.cuda.matmul.fp32_precision, generic)
        conv = _inherited(b.cudnn.conv.fp32_precision, getattr(b.cudnn, "fp32_precision", "none"), generic)
        matmul_on = matmul == "tf32" if matmul != "none" else bool(_legacy(lambda: b.cuda.matmul.allow_tf32))
        conv_on = conv == "tf32" if conv != "none" else bool(_legacy(lambda: b.cudnn.allow_tf32))
        api = "fp32_precision"
    else:
        matmul_on = bool(_legacy(lambda: b.cuda.matmul.allow_tf32))
        conv_on = bool(_legacy(lambda: b.cudnn.allow_tf32))
        api = "allow_tf32"
    return {"matmul": matmul_on, "cudnn": conv_on, "api": api, "supported": supported(torch, device)}


def supported(torch, device: Any) -> bool | None:
    """Whether `device` computes TF32: a CUDA GPU of compute capability 8.0 or later (not ROCm)."""
    if device is None:
        return None
    if getattr(device, "type", None) != "cuda" or getattr(torch.version, "hip", None):
        return False
    try:
        major, minor = torch.cuda.get_device_capability(device)
    except Exception:  # noqa: BLE001 - no driver, a device gone: it computes nothing
        return False
    return (major, minor) >= TF32_MIN_CAPABILITY


def used_by(tf32: Any, autocast: bool) -> bool | None:
    """From a start record's `tf32` (None for older runs): did a run's float32 work use TF32? Only
    where the device supports it and a flag allows it; an autocast run's matmuls are not float32."""
    if not isinstance(tf32, dict) or tf32.get("supported") is None:
        return None
    if not tf32.get("supported"):
        return False
    return bool(tf32.get("matmul")) or (bool(tf32.get("cudnn")) and not autocast)


def words(tf32: Any) -> str:
    """"matmul off, cuDNN on" for messages."""
    if not isinstance(tf32, dict):
        return "unknown"
    return f"matmul {'on' if tf32.get('matmul') else 'off'}, cuDNN {'on' if tf32.get('cudnn') else 'off'}"
