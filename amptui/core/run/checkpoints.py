"""What a resume check needs to know of a run's checkpoint, kept as plain JSON beside it.

The trainer writes `checkpoints/last.pt` (torch) and then `checkpoints/last.json`: the step and
epoch it holds, the config it was trained with, the trainer's code fingerprint, and the size and
modification time of the last.pt it describes. A resume check reads the JSON, so it needs no
torch. A last.json that is missing (runs from before it), unreadable, or that describes another
last.pt (a crash between the two writes, a damaged or copied file) is not trusted: the check
then reads last.pt itself, with torch, in the trainer's layer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from amptui.core import safefile
from amptui.core.errors import UserError
from amptui.core.run.runfiles import CHECKPOINT_FILE, CHECKPOINT_INFO
from amptui.core.safefile import atomic_write_text
from amptui.version import __version__

INFO_VERSION = 1
INFO_LIMIT = 64 * 1024 * 1024  # last.json holds the config: a long description, never a device's stream

# Keys that shape what a checkpoint holds: a resume whose config.toml changed any of them would
# load tensors into a different model or optimizer, so it is refused.
STRUCTURAL_KEYS = ("model.", "optim.name", "sched.name", "amp.autocast", "amp.dtype", "amp.grad_scaler",
                   "data.name", "data.batch_size", "amp.accumulate", "dist.mode", "dist.nproc_per_node",
                   "dist.nnodes")

Change = tuple[str, Any, Any]  # (dotted key, saved value, current value)


def config_changes(saved: Mapping[str, Mapping[str, Any]], current: Mapping[str, Mapping[str, Any]]) -> list[Change]:
    """[(dotted key, saved value, current value)] for every key that differs."""
    changes = []
    for section in sorted(set(saved) | set(current)):
        a, b = saved.get(section, {}), current.get(section, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                changes.append((f"{section}.{name}", a.get(name), b.get(name)))
    return changes


def structural(changes: list[Change]) -> list[Change]:
    return [c for c in changes if any(c[0] == k or (k.endswith(".") and c[0].startswith(k)) for k in STRUCTURAL_KEYS)]


def usable_config(saved: Any) -> dict[str, dict[str, Any]]:
    """A saved config as {section: {key: value}}; {} when it is not one (nothing to compare)."""
    if not isinstance(saved, dict) or not all(isinstance(v, dict) for v in saved.values()):
        return {}
    return saved


def check_config_fits(run_name: str, saved: Any, current: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse (UserError, one line) a resume whose config.toml changed a key that shapes what the
    checkpoint holds. A checkpoint with no usable record of its config passes here."""
    saved = usable_config(saved)
    changed = structural(config_changes(saved, current)) if saved else []
    if changed:
        listed = ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in changed[:4])
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        raise UserError(f"run {run_name}: config.toml changed since its checkpoint ({listed}{more}); the "
                        "checkpoint no longer fits. Put those values back, or start a new run")


def code_fingerprint() -> str:
    """amptui's version plus a hash of the trainer's source files (read as bytes, not imported):
    tells a resume that the code that wrote a checkpoint has changed."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parent.parent / "trainer").glob("*.py")):
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


# --- last.json ---------------------------------------------------------------------------------------

def _file_stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def describe(state: Mapping[str, Any], checkpoint_path: Path) -> dict[str, Any]:
    """The JSON for a checkpoint just written to `checkpoint_path` from the trainer's `state`."""
    progress = state.get("progress")
    if not isinstance(progress, Mapping):
        progress = {}
    return {"v": INFO_VERSION, "file": CHECKPOINT_FILE, **_file_stamp(checkpoint_path),
            "step": progress.get("step"), "epoch": progress.get("epoch"),
            "config": usable_config(state.get("config")), "code": state.get("code"),
            "autopilot": state.get("autopilot") if isinstance(state.get("autopilot"), dict) else None,
            "autopilot_state": state.get("autopilot_state") if isinstance(state.get("autopilot_state"), dict) else None}


def write_info(directory: Path, info: Mapping[str, Any]) -> Path:
    """Write last.json atomically (a temp file left by a writer killed mid-write is removed first)."""
    target = Path(directory) / CHECKPOINT_INFO
    for stale in target.parent.glob(f".{CHECKPOINT_INFO}.*.tmp"):
        stale.unlink(missing_ok=True)
    atomic_write_text(target, json.dumps(info, indent=1, default=str) + "\n")
    return target


def read_info(directory: Path) -> dict[str, Any] | None:
    """last.json when it describes the last.pt in `directory` now; None when it is missing,
    unreadable, or written for another last.pt (then only last.pt itself can tell)."""
    directory = Path(directory)
    try:
        info = safefile.load_json(directory / CHECKPOINT_INFO, INFO_LIMIT)
        stamp = _file_stamp(directory / CHECKPOINT_FILE)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("v") != INFO_VERSION:
        return None
    if info.get("size") != stamp["size"] or info.get("mtime_ns") != stamp["mtime_ns"]:
        return None
    return info


def stale_reason(directory: Path) -> str:
    """Why read_info gave None, in a few words (for a message)."""
    path = Path(directory) / CHECKPOINT_INFO
    if not os.path.exists(path):
        return f"no {CHECKPOINT_INFO} beside it (a run from an older amptui)"
    return f"its {CHECKPOINT_INFO} describes another {CHECKPOINT_FILE} (changed or damaged since)"
