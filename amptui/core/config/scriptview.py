"""What a script run's config.toml says: only what amptui knows about the script's run.

A script brings its own model, data, optimizer and schedule; writing amptui's defaults for them
(model.name = "smallcnn", data.name = "synthetic", ...) would name things the script never used.
Its config.toml keeps [run] (name, script, device), the precision the loop was seen to train in
([amp]), how it was launched ([dist]) and how often it records ([log]); reading it back fills the
rest with defaults, which nothing uses for a script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amptui.core.config.values import Config

SCRIPT_KEYS = {
    "run": ("name", "description", "device", "script"),
    "amp": ("autocast", "dtype", "grad_scaler", "init_scale", "growth_factor", "backoff_factor", "growth_interval"),
    "dist": None,  # all of it
    "log": ("every", "tensorboard"),
}


def script_sections(cfg: "Config") -> dict[str, dict[str, Any]]:
    """The sections of `cfg` a script run's config.toml holds (see the module doc)."""
    values = cfg.to_dict()
    out: dict[str, dict[str, Any]] = {}
    for section, keys in SCRIPT_KEYS.items():
        table = values.get(section, {})
        out[section] = dict(table) if keys is None else {k: table[k] for k in keys if k in table}
    return out
