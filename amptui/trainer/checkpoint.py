"""Checkpoints: everything a resumed run needs to continue as if it had never stopped.

Written to a temp file, fsynced, then `os.replace`d over the previous one, so a crash or a full
disk mid-write leaves the previous checkpoint intact. Read with `weights_only=True`: a
checkpoint can hold tensors and plain containers, never code.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import torch

FILENAME = "last.pt"


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


# Keys that shape what a checkpoint holds: a resume whose config.toml changed any of them would
# load tensors into a different model or optimizer, so it is refused.
STRUCTURAL_KEYS = ("model.", "optim.name", "sched.name", "amp.autocast", "amp.dtype", "amp.grad_scaler",
                   "data.name", "data.batch_size", "amp.accumulate", "dist.mode", "dist.nproc_per_node",
                   "dist.nnodes")


def code_fingerprint() -> str:
    """amptui's version plus a hash of the trainer's source: tells a resume that the code changed."""
    import hashlib

    from .. import __version__

    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


def config_changes(saved: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    """[(dotted key, saved value, current value)] for every key that differs."""
    changes = []
    for section in sorted(set(saved) | set(current)):
        a, b = saved.get(section, {}), current.get(section, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                changes.append((f"{section}.{name}", a.get(name), b.get(name)))
    return changes


def structural(changes: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    return [c for c in changes if any(c[0] == k or (k.endswith(".") and c[0].startswith(k)) for k in STRUCTURAL_KEYS)]


def save(directory: Path, state: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / FILENAME
    for stale in directory.glob(f".{FILENAME}.*.tmp"):  # left by a writer that died mid-write
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{FILENAME}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, Exception) and not isinstance(exc, OSError):
            # torch's zip writer turns a full disk into a RuntimeError; name the real cause
            cause = exc.__context__ if isinstance(exc.__context__, OSError) else exc
            raise OSError(f"checkpoint not written to {directory} ({str(cause).splitlines()[0]}); the "
                          "previous one is kept") from exc
        raise
    return target


def load(directory: Path, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    return torch.load(directory / FILENAME, map_location=map_location, weights_only=True)
