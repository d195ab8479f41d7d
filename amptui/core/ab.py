"""`amptui ab`: one preset, several precision setups, everything else identical."""

from __future__ import annotations

from .errors import UserError

# Each variant is a set of amp.* overrides; nothing else differs between the runs of an A/B.
VARIANTS: dict[str, dict[str, object]] = {
    "fp32": {"amp.autocast": False, "amp.grad_scaler": False},
    "fp16": {"amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": False},
    "fp16+scaler": {"amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True},
    "bf16": {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": False},
    "bf16+scaler": {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": True},
}
DEFAULT_CUDA = ("fp32", "fp16", "fp16+scaler")
DEFAULT_CPU = ("fp32", "bf16")


def expand(spec: str | None, device_type: str) -> list[tuple[str, dict[str, object]]]:
    """"fp32,bf16" -> [(name, overrides), ...]; None means the default for the device."""
    if spec is None:
        names = list(DEFAULT_CUDA if device_type == "cuda" else DEFAULT_CPU)
    else:
        names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise UserError("--variants: name at least one of " + ", ".join(VARIANTS))
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise UserError(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    if len(set(names)) != len(names):
        raise UserError("--variants: each variant once")
    return [(n, dict(VARIANTS[n])) for n in names]


PRECISION_KEYS = ("amp.autocast", "amp.dtype", "amp.grad_scaler")  # what a variant decides


def check_overrides(overrides: dict[str, object]) -> None:
    """--set may not decide what the variants decide."""
    clash = sorted(k for k in overrides if k in PRECISION_KEYS)
    if clash:
        raise UserError(f"--set {', '.join(clash)}: the variants set the precision; choose them with --variants")
