"""Where an `amptui.Monitor` writes, and the config it records: the run folder (`$AMPTUI_RUN_DIR`
or `run_dir=` when told, else a new folder under `$AMPTUI_RUNS_DIR`, shared with the other ranks
by broadcast) and the run's config (the folder's config.toml <- what the Monitor's objects tell
<- the user's `config=`). See amptui/monitor.py for the Monitor itself."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch

from amptui.core import safefile
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import narrow_dtype
from amptui.core.config.resolve import auto_overrides
from amptui.core.run import runlock, runs, trust
from amptui.core.run.folders import remember as remember_runs_folder
from amptui.core.run.runfiles import RUN_DIR_ENV, RunFolder
from amptui.core.safefile import atomic_write_text
from amptui.telemetry import ddp


def user_values(config: Any) -> dict[str, Any]:
    """Monitor(config=...) -> {"section.key": value} (checked against the schema later)."""
    if config is None:
        return {}
    if isinstance(config, cfgmod.Config):
        return config.flat()
    if not isinstance(config, Mapping):
        raise TypeError("Monitor(config=...) takes a dict or an amptui Config")
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if "." in key:
            flat[key] = value
        elif isinstance(value, Mapping):
            flat.update(cfgmod.flatten({key: dict(value)}, "Monitor(config=...)"))
        else:
            raise cfgmod.ConfigError(f"Monitor(config=...): {key!r} must be a section table or a dotted key")
    return flat


@dataclass
class Opening:
    """What a Monitor knows when it opens its run folder."""

    name: str
    rank: int
    world_size: int
    device: torch.device
    scaler_enabled: bool
    epochs: int | None
    log_every: int | None

    def open(self, run_dir: str | os.PathLike | None, config: Any) -> tuple[Path, cfgmod.Config, set[str], bool]:
        """(the run folder, the run's config, the keys the user's config= stated, whether this rank writes)."""
        user = user_values(config)
        env_dir = os.environ.get(RUN_DIR_ENV)
        path = Path(run_dir) if run_dir is not None else (Path(env_dir) if env_dir else None)
        if path is not None:  # launched by amptui (or told where): the folder may hold config.toml
            base = None
            cfg_path = RunFolder(path).config
            if cfg_path.is_file():
                base = cfgmod.read_toml(cfg_path)
            cfg = self.resolved(base, user)
            if self.rank == 0:
                path.mkdir(parents=True, exist_ok=True)
                runlock.hold_for_this_process(path)  # one writer per run folder; before writing to it
                said = isinstance((base or {}).get("amp"), dict) or any(k.startswith("amp.") for k in user)
                text = runs.config_text(cfg, f"# amptui run {path.name}: written by amptui.Monitor",
                                        precision_seen=said, users_loop=True)  # a script's: said at its first step
                if not cfg_path.is_file() or safefile.text_or_none(cfg_path, cfgmod.TOML_LIMIT) != text:
                    atomic_write_text(cfg_path, text)
                trust.remember(path, trust.code_refs(cfg))  # this script runs here: its code was given here
                remember_runs_folder(path.parent)  # a dashboard opened elsewhere lists it (`o`)
                if not RunFolder(path).run_json.is_file():
                    runs.write_launch_info(path, os.getpid(), list(sys.argv))
            return path, cfg, set(user), True
        cfg = self.resolved(None, user)
        shared = self.shared_new_dir()
        if shared is None:
            return Path(os.devnull), cfg, set(user), False
        if self.rank == 0:
            runlock.hold_for_this_process(shared)
            runs.write_new(RunFolder(shared), cfg, f"# amptui run {shared.name}: written by amptui.Monitor",
                           users_loop=True)
            runs.write_launch_info(shared, os.getpid(), list(sys.argv))
        return shared, cfg, set(user), True

    def resolved(self, base: Mapping | None, user: dict[str, Any]) -> cfgmod.Config:
        """The run's config: base (the run folder's) <- what we can tell from the objects <- yours."""
        told: dict[str, Any] = {}
        base_run = (base or {}).get("run", {}) if isinstance((base or {}).get("run"), dict) else {}
        if base is None or base_run.get("name", "") in ("", Path(base_run.get("script", "")).stem):
            told["run.name"] = self.name  # amptui's default name (the script's stem) gives way to yours
        if base is None:
            script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
            if script and os.path.isfile(script):
                told["run.script"] = script
            if self.world_size > 1:  # "fsdp" instead once a sharded model is seen (the start record's)
                per_node = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
                told.update({"dist.mode": "ddp", "dist.nproc_per_node": per_node,
                             "dist.nnodes": max(1, self.world_size // per_node),
                             "dist.node_rank": int(os.environ.get("GROUP_RANK", 0))})
        if "amp.grad_scaler" not in user:
            told["amp.grad_scaler"] = self.scaler_enabled
            if self.scaler_enabled and "amp.dtype" not in user and base is None:
                told["amp.dtype"] = narrow_dtype()  # a GradScaler is what float16 needs
        if "run.epochs" not in user and self.epochs:
            told["run.epochs"] = int(self.epochs)
        if "log.every" not in user and self.log_every is not None:
            told["log.every"] = self.log_every
        cfg = cfgmod.build_config(base or {}, {**told, **user}, source="Monitor(config=...)",
                                  overrides_source="Monitor(config=...)")
        device_type = self.device.type if self.device.type in ("cpu", "cuda") else "cpu"
        return cfg.with_overrides(auto_overrides(cfg, device_type), source="Monitor(config=...)")

    def shared_new_dir(self) -> Path | None:
        """Rank 0 makes the folder; under torch.distributed the other ranks learn it by broadcast.
        Without a process group, ranks other than 0 cannot know it and write nothing (None)."""
        shared = ddp.initialized(self.world_size)
        if self.rank == 0:
            path = runs.create_folder(None, self.name).path
            if shared:
                torch.distributed.broadcast_object_list([str(path)], src=0)
            return path
        if shared:
            box: list[str | None] = [None]
            torch.distributed.broadcast_object_list(box, src=0)
            if box[0] is None:
                raise RuntimeError("rank 0 sent no run folder")
            return Path(box[0])
        return None
