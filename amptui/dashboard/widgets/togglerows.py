"""The toggles' rows, without their widgets: which preset keys the home screen shows and how
(switch, select or text), the CLI's rules for what is typed (`--set`'s parsing and checks), the
precision select's variants (every precision mode's: modes.MODES) and the keys each one sets, and
the launcher's rules told at once (DataParallel's GPU count). The panel (toggles.py) draws them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from textual.validation import ValidationResult, Validator

from amptui.core import modes
from amptui.core.config import values as cfgmod
from amptui.core.config.keychecks import check_value
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Toggle:
    key: str       # dotted schema key
    label: str
    kind: str      # switch | select | input
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def wid(self) -> str:
        return "t-" + self.key.replace(".", "-").replace("_", "-")


def _choices(key: str) -> tuple[tuple[str, Any], ...]:
    section, name = key.split(".")
    return tuple((c, c) for c in cfgmod.SCHEMA[section][name].choices or ())


TOGGLES: tuple[Toggle, ...] = (
    Toggle("amp.autocast", "autocast", "switch"),
    Toggle("amp.grad_scaler", "GradScaler", "select", (("auto", "auto"), ("on", True), ("off", False))),
    Toggle("amp.dtype", "dtype", "select", _choices("amp.dtype")),
    # a row for each precision mode that has one (a recipe to pick), from the registry
    *(Toggle(m.toggle, m.name, "select", _choices(m.toggle)) for m in modes.MODES if m.toggle),
    Toggle("dist.mode", "parallel", "select", _choices("dist.mode")),
    Toggle("run.device", "device", "select", _choices("run.device")),
    Toggle("dist.nproc_per_node", "nproc", "input"),
    Toggle("data.batch_size", "batch size", "input"),
    Toggle("optim.lr", "lr", "input"),
    Toggle("run.epochs", "epochs", "input"),
    Toggle("run.max_steps", "max steps", "input"),
)
BY_KEY = {t.key: t for t in TOGGLES}
PRECISION_ID = "t-precision"
OTHER = "other"  # the precision select when the rows form no offered variant ([amp.layers], an FSDP policy)


def precision_variants() -> list[str]:
    """What the precision select offers: every mode's variants but the FSDP-only ones (parallel
    fsdp with the dtype rows gives those)."""
    return [n for m in modes.MODES if m.group != "fsdp" for n in m.variants()]


def variant_of(cfg: cfgmod.Config, device_type: str, offered: list[str]) -> str:
    """The offered variant that is exactly `cfg`'s precision on `device_type`, else OTHER."""
    p = Precision.from_config(cfg, device_type)
    return next((v for v in offered if Precision.from_variant(v) == p), OTHER)


def variant_keys(variant: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keys that make `variant`, as (the rows' values, the keys no row shows): each mode's row
    at its default unless the variant sets it, TF32 off for plain float32."""
    p = Precision.from_variant(variant)
    keys = {**{m.toggle: _default(m.toggle) for m in modes.MODES if m.toggle}, **p.overrides()}
    if not p.autocast:
        keys.setdefault("amp.tf32", False)
    return {k: v for k, v in keys.items() if k in BY_KEY}, {k: v for k, v in keys.items() if k not in BY_KEY}


def _default(key: str) -> Any:
    section, name = key.split(".")
    return cfgmod.SCHEMA[section][name].default


def parse_text(key: str, text: str) -> Any:
    """Input text -> a checked value for `key`, with the same parsing and rules as `--set`.

    Raises ConfigError with a one-line reason."""
    raw = text.strip()
    label = BY_KEY[key].label if key in BY_KEY else key
    if not raw:
        raise ConfigError(f"{label}: {key} needs a value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return check_value(key, value, label)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") and "e" not in text else text
    return str(value)


class KeyValidator(Validator):
    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_text(self.key, value)
        except ConfigError as exc:
            return self.failure(str(exc))
        return self.success()


def dp_problem(cfg: cfgmod.Config, gpus: int) -> str | None:
    """The launcher's DataParallel rule (preflight.resolve), told at once from a cheap GPU count."""
    if cfg.dist.mode != "dp":
        return None
    device = cfg.run.device
    usable = 0 if device == "cpu" else gpus
    if usable < 2:
        return (f"parallel dp (DataParallel) needs at least 2 GPUs; this machine has {usable} usable"
                f"{' (device cpu)' if device == 'cpu' else ''}: choose none, or ddp for several processes")
    return None


def cuda_visible() -> bool:
    """A cheap guess (no torch import) used only for wording: is there an NVIDIA driver, with its
    GPUs not hidden (CUDA_VISIBLE_DEVICES="" or -1 hides them from torch)?"""
    import os

    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return False
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")
