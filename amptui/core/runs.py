"""Run storage: one folder per run under the runs directory, and what a run's status is.

    runs/<run_id>/config.toml      the fully resolved preset
                  run.json         who launched it: pid (+ its start time), host, command
                  events.jsonl     the event stream (rank 0; other ranks events.rank<N>.jsonl)
                  output.log       the trainer's stdout/stderr
                  checkpoints/     last.pt, written atomically

Status comes from the events and the process table: the last session's `end` record if there
is one, else `running` while the launched process is alive, else `killed`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import config as cfgmod
from .errors import ConfigError, UserError
from .events import primary_events_file, read_events

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
STATUSES = ("running", "completed", "stopped", "failed", "killed")
_HEAD_BYTES = 256 * 1024
_TAIL_BYTES = 256 * 1024


def runs_root(arg: str | os.PathLike | None = None) -> Path:
    """--runs-dir, else $AMPTUI_RUNS_DIR, else ./runs."""
    return Path(arg or os.environ.get("AMPTUI_RUNS_DIR") or "runs").expanduser()


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id or "") or ".." in run_id:
        raise UserError(f"{run_id!r} is not a run id (see `amptui runs`)")
    return run_id


def run_dir(root: Path, run_id: str) -> Path:
    path = Path(root) / check_run_id(run_id)
    if not (path / "config.toml").is_file():
        raise UserError(f"no run {run_id!r} in {root} (see `amptui runs --runs-dir DIR`)")
    return path


def new_run_dir(root: Path, preset_name: str) -> Path:
    """Create a fresh run folder; ids are time-ordered and unique even for runs started together."""
    root.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "-", preset_name).strip("-.")[:40] or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(100):
        path = root / f"{stamp}-{slug}-{secrets.token_hex(2)}"
        try:
            path.mkdir()  # atomic: two launches can never get the same folder
            return path
        except FileExistsError:
            continue
    raise UserError(f"could not create a run folder in {root}")


# --- who runs it ------------------------------------------------------------------------------

def write_launch_info(path: Path, pid: int, command: list[str]) -> None:
    from .presets import atomic_write_text

    info = {"pid": pid, "create_time": _create_time(pid), "host": socket.gethostname(),
            "command": command, "launched": time.time()}
    atomic_write_text(path / "run.json", json.dumps(info, indent=2) + "\n")


def read_launch_info(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def _create_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def process_alive(info: dict[str, Any]) -> bool:
    """Is the launched process still there (and the same process, not a reused pid)?"""
    pid = info.get("pid")
    if not pid:
        return False
    if info.get("host") not in (None, socket.gethostname()):
        return True  # launched elsewhere: we cannot see it, do not call it dead
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = info.get("create_time")
        return created is None or abs(proc.create_time() - created) < 1.0
    except psutil.Error:
        return False


# --- what a run is now -------------------------------------------------------------------------

@dataclass
class RunInfo:
    run_id: str
    path: Path
    preset: str = ""
    precision: str = ""
    precision_words: str = ""
    status: str = "running"
    step: int = 0
    total_steps: int | None = None
    epoch: int = 0
    epochs: int | None = None
    started: float | None = None
    duration_s: float | None = None
    world_size: int = 1
    final_loss: float | None = None
    val_acc: float | None = None
    error: str = ""
    pid: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def progress(self) -> float | None:
        if not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["progress"] = self.progress
        data.pop("extra")
        return data


def _head_tail(path: Path) -> tuple[list[dict], list[dict]]:
    """Records from the start and the end of an event file, without reading all of a huge one."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return [], []
    if size <= _HEAD_BYTES + _TAIL_BYTES:
        records = read_events(path)
        return records, records
    with open(path, "rb") as fh:
        head = fh.read(_HEAD_BYTES)
        fh.seek(size - _TAIL_BYTES)
        tail = fh.read()
    return _parse_lines(head, drop_first=False), _parse_lines(tail, drop_first=True)


def _parse_lines(chunk: bytes, drop_first: bool) -> list[dict]:
    lines = chunk.split(b"\n")
    if drop_first:
        lines = lines[1:]  # the first line of a tail chunk is cut
    if lines and not chunk.endswith(b"\n"):
        lines = lines[:-1]
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def load_run(path: Path) -> RunInfo:
    path = Path(path)
    info = RunInfo(run_id=path.name, path=path)
    try:
        values = cfgmod.read_toml(path / "config.toml")
        cfg = cfgmod.build_config(values, source=str(path / "config.toml"))
        info.preset = cfg.run.name
        device = cfg.run.device if cfg.run.device != "auto" else "cpu"
        info.precision = cfgmod.precision_short(cfg.to_dict(), device)
        info.precision_words = cfgmod.precision_words(cfg.to_dict(), device)
        info.epochs = cfg.run.epochs
        info.world_size = cfgmod.world_size(cfg.to_dict())
    except ConfigError as exc:
        info.error = str(exc)
    launch = read_launch_info(path)
    info.pid = launch.get("pid")
    head, tail = _head_tail(primary_events_file(path))
    first_start = next((r for r in head if r.get("kind") == "start"), None)
    if first_start:
        info.started = first_start.get("t")
        info.total_steps = first_start.get("total_steps")
        info.world_size = first_start.get("world_size", info.world_size)
    elif launch.get("launched"):
        info.started = launch["launched"]
    last_session_end = None
    for rec in tail:
        kind = rec.get("kind")
        if kind == "start":
            last_session_end = None
            info.total_steps = rec.get("total_steps", info.total_steps)
        elif kind == "end":
            last_session_end = rec
        elif kind == "step":
            info.step = rec.get("step", info.step)
            info.epoch = rec.get("epoch", info.epoch)
            info.final_loss = rec.get("loss", info.final_loss)
        elif kind == "epoch":
            info.epoch = rec.get("epoch", info.epoch)
            if rec.get("val_acc") is not None:
                info.val_acc = rec["val_acc"]
    last_t = tail[-1].get("t") if tail else None
    if last_session_end is not None:
        info.status = last_session_end.get("status", "failed")
        info.step = last_session_end.get("steps", info.step)
        if last_session_end.get("final_loss") is not None:
            info.final_loss = last_session_end["final_loss"]
        if last_session_end.get("val_acc") is not None:
            info.val_acc = last_session_end["val_acc"]
        error = last_session_end.get("error") or {}
        if error:
            where = f"rank {error['rank']}: " if info.world_size > 1 and error.get("rank") is not None else ""
            info.error = f"{where}{error.get('type', 'Error')}: {error.get('message', '')}"
    elif process_alive(launch):
        info.status = "running"
        last_t = time.time()
    else:
        info.status = "killed"
    if info.started is not None and last_t is not None:
        info.duration_s = max(0.0, last_t - info.started)
    return info


def list_runs(root: Path) -> list[RunInfo]:
    """Every run under `root`, newest first."""
    if not root.is_dir():
        return []
    runs = [load_run(p) for p in root.iterdir() if p.is_dir() and (p / "config.toml").is_file()]
    runs.sort(key=lambda r: (r.started or 0, r.run_id), reverse=True)
    return runs
