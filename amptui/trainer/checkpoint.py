"""Checkpoints: everything a resumed run needs to continue as if it had never stopped.

Written to a temp file, fsynced, then `os.replace`d over the previous one, so a crash or a full
disk mid-write leaves the previous checkpoint intact. Read with `weights_only=True`: a
checkpoint can hold tensors and plain containers, never code.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch

from amptui.core.config.values import Config
from amptui.core.errors import UserError
from amptui.core.run import checkpoints as info
from amptui.core.run.checkpoints import (
    code_fingerprint as code_fingerprint,  # saved with a checkpoint, compared on resume
)
from amptui.core.run.checkpoints import config_changes as config_changes  # the trainer's resume warns with it
from amptui.core.run.runfiles import CHECKPOINT_FILE as FILENAME
from amptui.core.run.runfiles import RunFolder
from amptui.core.safefile import atomic_writer, open_file
from amptui.trainer.models import build_model


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_tuple(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(value):
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def save(directory: Path, state: dict[str, Any]) -> Path:
    """Write `state` as last.pt (atomically); for a trainer's checkpoint (one with its config),
    then last.json beside it, which lets a resume check the config without torch."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / FILENAME
    for stale in directory.glob(f".{FILENAME}.*.tmp"):  # left by a writer that died mid-write
        stale.unlink(missing_ok=True)
    try:
        with atomic_writer(target) as fh:  # temp file beside it, fsync, rename; the umask's mode
            torch.save(state, fh)
    except Exception as exc:
        if not isinstance(exc, OSError):
            # torch's zip writer turns a full disk into a RuntimeError; name the real cause
            cause = exc.__context__ if isinstance(exc.__context__, OSError) else exc
            raise OSError(f"checkpoint not written to {directory} ({str(cause).splitlines()[0]}); the "
                          "previous one is kept") from exc
        raise
    if isinstance(state.get("config"), dict):
        try:
            info.write_info(directory, info.describe(state, target))
        except OSError:
            pass  # last.pt is written; a last.json left describing the previous one is not trusted
    return target


REQUIRED = ("model", "optimizer", "schedule", "scaler", "progress", "rng")


def _reason(exc: BaseException) -> str:
    """An exception as a short phrase, also when its text is empty or many lines long."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:160]}" if first else type(exc).__name__


def load(directory: Path, map_location: torch.device | str = "cpu", require: tuple[str, ...] = ()) -> dict[str, Any]:
    """The checkpoint's state, or a UserError in one line when the file is empty, truncated,
    not a checkpoint, or lacks a `require`d key (REQUIRED: not one of amptui's trainer)."""
    path = Path(directory) / FILENAME
    try:
        with open_file(path, "rb") as fh:  # as data: no link followed, no FIFO waited on
            state = torch.load(fh, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{path}: no checkpoint to resume from") from None
    except Exception as exc:  # empty, truncated, garbage, or pickled code that weights_only refuses
        raise UserError(f"{path}: not a readable checkpoint ({_reason(exc)}); the run cannot continue from "
                        "it: start it again with `amptui run`") from None
    missing = [k for k in require if k not in state] if isinstance(state, dict) else list(require) or ["state"]
    if missing:
        raise UserError(f"{path}: not an amptui checkpoint (no {', '.join(missing)}); start the run again "
                        "with `amptui run`")
    return state


def check_resume(run_dir: Path, current: Config) -> None:
    """Read last.pt itself (torch) and refuse, in one line, a resume it cannot serve: unreadable,
    not amptui's, trained with another structural config, or tensors that do not fit the model of
    config.toml. For checkpoints whose last.json does not describe them (core checks the others)."""
    directory = RunFolder(run_dir).checkpoints
    state = load(directory, require=REQUIRED)  # a damaged file: one line naming it
    info.check_config_fits(Path(run_dir).name, state.get("config"), current.to_dict())
    check_fits(state, directory / FILENAME, current)


def check_fits(state: dict[str, Any], path: Path, cfg: Config) -> None:
    """Refuse a checkpoint whose model tensors do not fit the model config.toml describes (built on
    the meta device: no memory, no weights read). Models from a user's factory are left to load."""
    if cfg.model.factory or not isinstance(state.get("model"), dict):
        return
    try:
        with torch.device("meta"):
            expected = build_model(cfg.with_overrides({"model.pretrained": False}).model).state_dict()
    except Exception:
        return  # cannot tell here; the trainer's load says what is wrong
    saved = state["model"]
    for name, tensor in expected.items():
        got = saved.get(name)
        if not isinstance(got, torch.Tensor):
            raise UserError(f"{path}: holds no {name} for the model in config.toml; it comes from another model")
        if tuple(got.shape) != tuple(tensor.shape):
            raise UserError(f"{path}: {name} has shape {tuple(got.shape)}, the model in config.toml needs "
                            f"{tuple(tensor.shape)}; it comes from another model")
    extra = [k for k in saved if k not in expected]
    if extra:
        raise UserError(f"{path}: holds {extra[0]} (and {len(extra) - 1} more) that the model in config.toml "
                        "does not have; it comes from another model")
