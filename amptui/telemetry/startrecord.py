"""The start record as the Recorder writes it: the run's precision as its mode says it (each mode's
conversion and [amp.layers]' modules beside it), and the machine and process it runs in."""

from __future__ import annotations

import os
import socket
from typing import Any

import torch

from amptui.core import cluster
from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.core.stream.records import Start
from amptui.machine import tf32
from amptui.telemetry.device import device_info


def start_record(config: Config, device: torch.device, world_size: int, scale: float | None, precision: Precision,
                 **fields: Any) -> Start:
    """`fields`: Start's own (run_id, preset, total_steps, ...) and these: `precision_seen=False` (a
    script that ended before its loop showed its precision: "" (not seen), never the config's
    defaults), `config_shown` (what config.toml says, when it is not all of config), `conversions`
    (each mode's, by its record key); `precision`: the loop's (the trainer's with [amp.layers] resolved on its model),
    `layer_modules` ([amp.layers]: each layer -> the variant it computes in)."""
    seen = fields.pop("precision_seen", True)
    shown = fields.pop("config_shown", None)
    conversions = fields.pop("conversions", None) or {}
    modules = fields.pop("layer_modules", None)
    said = precision.as_record() if seen else ""
    for key, done in conversions.items():  # [amp.layers]' conversions in a run whose own keys ask for none too
        if isinstance(said, dict):
            said.setdefault(key, {}).update(done)
    if modules and isinstance(said, dict) and isinstance(said.get("layers"), dict):
        said["layers"]["modules"] = modules
    return Start(config=shown if shown is not None else config.to_dict(), precision=said,
                 world_size=world_size, device=device_info(device), torch=torch.__version__,
                 host=socket.gethostname(), pid=os.getpid(), scale=scale,
                 slurm=cluster.slurm_identity(), tf32=tf32.state(torch, device), **fields)
