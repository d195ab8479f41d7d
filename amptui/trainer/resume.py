"""Checkpoint and resume: what a checkpoint holds, and how a resumed run takes it back.

A resumed run continues exactly where it stopped: the model, optimizer, lr schedule, GradScaler
and RNG states, and the counters (`Progress`) that place it in its epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from amptui.core.config.values import Config
from amptui.core.run.runfiles import RunFolder
from amptui.telemetry import Counters
from amptui.trainer import checkpoint, fsdp
from amptui.trainer.state import TrainingState


@dataclass
class Progress(Counters):
    """Counters that make a resumed run continue exactly where it stopped (the Recorder's, plus)."""

    batch_in_epoch: int = 0   # micro-batches of the current epoch already consumed


def gather_sharded(state: TrainingState) -> tuple[dict, dict] | None:
    """FSDP: the full (model, optimizer) state on rank 0, gathered by every rank; None otherwise."""
    return fsdp.gather_state(state.model, state.optimizer) if state.sharded else None


def write_checkpoint(run_dir: Path, cfg: Config, state: TrainingState, progress: Progress, last_scale: float | None,
                     gathered: tuple[dict, dict] | None = None, switched: dict | None = None,
                     pilot: dict | None = None) -> Path:
    """Write the checkpoint (rank 0's job); its path. `gathered`: FSDP's full state (gather_sharded).
    `cfg`: config.toml's; `switched`: the keys the autopilot changed since (trainer/autopilot.py)."""
    model_state, optim_state = gathered or (state.model.state_dict(), state.optimizer.state_dict())
    saved = {
        "model": model_state,
        "optimizer": optim_state,
        "schedule": state.schedule.state_dict(),
        "scaler": state.scaler.state_dict(),
        "progress": dict(vars(progress)),
        "last_scale": last_scale,
        "rng": checkpoint.rng_state(),
        "config": cfg.to_dict(),
        "code": checkpoint.code_fingerprint(),
    }
    if switched:
        saved["autopilot"] = dict(switched)
    if pilot:  # the autopilot's counts a run (trainer/autopilot.py: Autopilot.kept)
        saved["autopilot_state"] = dict(pilot)
    path = checkpoint.save(RunFolder(run_dir).checkpoints, saved)
    state.faults.after_checkpoint()
    return path


def restore(run_dir: Path, cfg: Config, state: TrainingState, progress: Progress,
            warn: Callable[..., None]) -> int:
    """Load the last checkpoint into the state's objects and `progress`, in place; the step it
    resumes from. A changed config.toml or trainer code is said, not refused."""
    # On the CPU first: RNG states must stay CPU tensors; load_state_dict moves the rest.
    saved = checkpoint.load(RunFolder(run_dir).checkpoints, map_location="cpu")
    changes = checkpoint.config_changes(saved.get("config", {}), cfg.to_dict())
    if changes:
        listed = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changes)
        warn(f"config.toml changed since the checkpoint ({listed}); resuming with the current file",
             code="resume_config_changed")
    if saved.get("code") != checkpoint.code_fingerprint():
        warn(f"amptui's trainer code changed since the checkpoint ({saved.get('code')} -> "
             f"{checkpoint.code_fingerprint()}); results may not match an uninterrupted run",
             code="resume_code_changed")
    if state.sharded:  # every rank read the full state; each keeps its shard
        fsdp.load_state(state.model, state.optimizer, saved["model"], saved["optimizer"])
    else:
        state.model.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
    state.schedule.load_state_dict(saved["schedule"])
    state.scaler.load_state_dict(saved["scaler"])
    for key, value in saved["progress"].items():  # in place: the Recorder counts on the same object
        setattr(progress, key, value)
    checkpoint.set_rng_state(saved["rng"])
    return progress.step
