"""Run storage: one folder per run under the runs directory, and what a run's status is.

    runs/<run_id>/config.toml      the fully resolved preset
                  run.json         who launched it: pid (+ its start time), host, command
                  events.jsonl     the event stream (rank 0; other ranks events.rank<N>.jsonl)
                  output.log       the trainer's stdout/stderr
                  checkpoints/     last.pt, written atomically

Status comes from the events and the run's lock (core/runlock.py): `running` while a writer
holds the lock (a new session may not have written its `start` yet), else the last session's
`end` record if there is one, else `killed`. Folders from before the lock file fall back to
run.json's pid and the process table.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amptui.core import distribution, hygiene, safefile
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.config.scriptview import APPLIED_BY, precision_seen, script_sections
from amptui.core.errors import ConfigError, UserError
from amptui.core.run import runlock, trust
from amptui.core.run.folders import remember
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runids import RUN_ID_RE, resolve_run_dir
from amptui.core.run.runstate import RunState, fold
from amptui.core.safefile import atomic_write_text
from amptui.core.stream.eventends import SessionIndex, read_ends
from amptui.core.stream.events import primary_events_file
from amptui.core.stream.records import START


def runs_root(arg: str | os.PathLike | None = None, *, writable: bool = False) -> Path:
    """--runs-dir, else $AMPTUI_RUNS_DIR, else ./runs; checked, so that a file or an unusable place
    there is one clear line (exit 2) for every command, not a traceback or an empty list.

    writable: the command will create runs there (the folder, or the first existing folder above
    it, must be writable).
    """
    env = os.environ.get("AMPTUI_RUNS_DIR")
    given = arg or env or "runs"
    where = f"--runs-dir {arg}" if arg else (f"AMPTUI_RUNS_DIR={env}" if env else f"runs folder {given}")
    root = Path(given).expanduser()
    check_runs_root(root, where, writable)
    return root


def check_runs_root(root: Path, where: str, writable: bool = False) -> None:
    """Raise UserError (naming `where`) unless `root` is, or can become, a usable runs folder."""
    existing = root
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            raise UserError(f"{where}: {existing} is a broken link; give a folder for runs")
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "a file, not a folder" if existing == root else f"cannot be created, {existing} is a file"
        raise UserError(f"{where}: {what}; give a folder for runs")
    if existing == root and not os.access(root, os.R_OK | os.X_OK):
        raise UserError(f"{where}: cannot read that folder (permission denied)")
    if writable and not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{where}: cannot create runs in {existing} (permission denied)")


def run_dir(root: Path, run_id: str) -> Path:
    """The run folder an id names as people type it: whole, a unique prefix, the dashboard's short
    tail, or `last` (core/run/runids.py)."""
    return resolve_run_dir(root, run_id)


def new_run_dir(root: Path, preset_name: str) -> Path:
    """Create a fresh run folder; ids are time-ordered and unique even for runs started together."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission, read-only filesystem
        raise UserError(f"cannot create runs in {root}: {exc.strerror or exc}") from None
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "-", preset_name).strip("-.")[:40] or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(100):
        path = root / f"{stamp}-{slug}-{secrets.token_hex(2)}"
        try:
            path.mkdir()  # atomic: two launches can never get the same folder
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise UserError(f"cannot create runs in {root}: {exc.strerror or exc}") from None
    raise UserError(f"could not create a run folder in {root}")


# --- who runs it ------------------------------------------------------------------------------

def create_folder(root: Path | None, name: str) -> RunFolder:
    """A fresh, empty run folder under the runs root (`root`, or the default one): the one way a
    run folder is made, for the launcher and the Monitor alike."""
    folder = RunFolder(new_run_dir(runs_root(root), name))
    remember(folder.path.parent)  # so a dashboard opened elsewhere can find this runs folder
    return folder


def write_new(folder: RunFolder, cfg: cfgmod.Config, header: str, users_loop: bool = False) -> None:
    """Fill a fresh folder: its config.toml (under `header`) and checkpoints folder, and its code
    remembered as given here (core/run/trust.py). A full disk or a quota leaves no half-made run
    folder behind: the folder is removed and a UserError says why. A script's loop has not run
    yet, so its config.toml says no precision (core/config/scriptview.py). `users_loop`: a
    Monitor's folder, whose config is a user's loop's even when no script file is known."""
    try:
        text = config_text(cfg, header, precision_seen=not cfg.run.script, users_loop=users_loop)
        safefile.atomic_write_text(folder.config, text)
        folder.checkpoints.mkdir(exist_ok=True)
    except OSError as exc:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise UserError(f"cannot create run {folder.name} in {folder.path.parent}: {exc.strerror or exc}") from None
    trust.remember(folder.path, trust.code_refs(cfg))  # its code was given here


def config_text(cfg: cfgmod.Config, header: str, precision_seen: bool = True, users_loop: bool = False) -> str:
    """A run's config.toml: the whole resolved config, or for a script run (or any user's loop: a
    Monitor's) only what amptui knows of it (core/config/scriptview.py: no model or data the loop
    never used, no precision before its loop is `precision_seen`)."""
    mine = users_loop or bool(cfg.run.script)
    return cfgmod.to_toml(script_sections(cfg, precision_seen) if mine else cfg.to_dict(), header)


def write_launch_info(path: Path, pid: int, command: list[str]) -> None:
    info = {**launch_identity(pid), "command": command, "launched": time.time()}
    atomic_write_text(RunFolder(path).run_json, json.dumps(info, indent=2) + "\n")


def read_launch_info(path: Path) -> dict[str, Any]:
    """run.json, or {} when it is missing or damaged (fields of the wrong type are dropped)."""
    try:
        info = safefile.load_json(RunFolder(path).run_json, 1024 * 1024)
    except (OSError, ValueError):
        return {}
    if not isinstance(info, dict):
        return {}
    types: dict[str, type | tuple[type, ...]] = {"pid": int, "create_time": (int, float), "launched": (int, float),
                                                 "host": str, "command": list}
    kept = {k: v for k, v in info.items() if k not in types or (isinstance(v, types[k]) and not isinstance(v, bool))}
    if "pid" in kept and kept["pid"] <= 0:  # -1 or 0 name every process or a group to kill(2): no process
        kept["damaged"] = f"run.json: pid {kept.pop('pid')} is not a process id"
    return kept


def recorded_script_args(command: object) -> list[str] | None:
    """A script run's own arguments, from the command its run.json records (`python -u -m
    amptui.trainer.scriptrun RUN_DIR SCRIPT ARGS...`); None where they are not recorded there
    (a torchrun launch, a run its own launcher started)."""
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        return None
    for i, word in enumerate(command):
        if word.endswith(".scriptrun") and i > 0 and command[i - 1] == "-m" and len(command) >= i + 3:
            return command[i + 3:]
    return None


def launch_identity(pid: int) -> dict[str, Any]:
    """What tells this process apart from a later one that reuses its pid (see process_alive)."""
    return {"pid": pid, "create_time": _create_time(pid), "host": socket.gethostname()}


def _create_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def process_alive(info: dict[str, Any]) -> bool:
    """Is the launched process still there (and the same process, not a reused pid)?"""
    pid, created = info.get("pid"), info.get("create_time")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if info.get("host") not in (None, socket.gethostname()):
        return True  # launched elsewhere: we cannot see it, do not call it dead
    if not isinstance(created, (int, float)):
        return False  # no start time recorded: a live pid may be anyone's (an old or copied folder)
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - created) < 1.0
    except (psutil.Error, ValueError):
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
    code: list[str] = field(default_factory=list)  # the code its config names (core/run/trust.py)
    code_given_here: bool = True                   # ... given on this machine (False: resume asks)
    extra: dict[str, Any] = field(default_factory=dict)
    dist: dict[str, Any] | None = None             # mode, world_size, FSDP policy (core/distribution.py)
    script_line: str = ""                          # a script run: its file and arguments ("train.py --lr 0.1")
    hygiene: list[str] = field(default_factory=list)  # precision-hygiene findings said (core/hygiene.py codes)
    nonfinite: str = ""                            # its loss went inf/NaN: why, in a few words (RunState.nonfinite)

    @property
    def status_shown(self) -> str:
        """The run lists' status cell: the status, marked when the run's loss went inf/NaN ("completed NaN")."""
        return f"{self.status} NaN" if self.nonfinite else self.status

    @property
    def precision_label(self) -> str:
        """The run lists' precision cell: "bf16 FSDP x2", "fp32 DDP x2", "fp16+scaler"."""
        return distribution.precision_label(self.precision, self.dist)

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


def writer_alive(path: Path, launch: dict[str, Any] | None = None,
                 alive=None) -> tuple[bool, float | None]:
    """(is a writer alive, since when) from the run's lock; for older folders without a lock file,
    run.json's pid (`launch`, read when not given) checked by `alive` (default process_alive)."""
    try:
        holder = runlock.holder(path)
    except FileNotFoundError:
        launch = read_launch_info(path) if launch is None else launch
        return (alive or process_alive)(launch), None
    except OSError:
        return False, None
    if holder is None:
        return False, None
    since = holder.get("since")
    return True, since if isinstance(since, (int, float)) else None


def load_run(path: Path, own_lock: bool = False, sessions: SessionIndex | None = None) -> RunInfo:
    """What a run is now. `own_lock`: the caller holds the run's lock itself (about to resume
    it), so the lock says nothing about whether another writer is alive. `sessions`: a caller
    that lists runs again and again keeps what was read of big event files there."""
    path = Path(path)
    info = RunInfo(run_id=path.name, path=path)
    seen, script_run, applied = True, False, False
    try:
        raw = cfgmod.read_toml(RunFolder(path).config)
        cfg = cfgmod.build_config(raw, source=str(RunFolder(path).config))
        info.preset = cfg.run.name
        precision = Precision.from_config(cfg)
        seen = precision_seen(raw)  # a script before its first step: "" (not seen), never the defaults
        if seen:
            info.precision, info.precision_words = precision.short, precision.words
            if cfg.run.apply_amp and precision.autocast:  # `amptui ab --script --variants`: not the script's own
                info.precision_words += APPLIED_BY
        applied = bool(cfg.run.apply_amp)
        info.epochs = cfg.run.epochs
        script_run = bool(cfg.run.script)  # a script's own loop (`run --script` / `-m`): its epochs are its own
        info.world_size = cfgmod.world_size(cfg)
        info.dist = distribution.dist_of(cfg.dist.mode, info.world_size, precision.fsdp_policy if seen else None)
        info.code = trust.code_refs(cfg)
        info.code_given_here = trust.given_here(path, info.code)
    except ConfigError as exc:
        info.error = str(exc)
    launch = read_launch_info(path)
    info.pid = launch.get("pid")
    if script_run and not info.error:
        args = recorded_script_args(launch.get("command"))
        info.script_line = " ".join([Path(cfg.run.script).name, *(args or [])])
    info.error = info.error or launch.get("damaged", "")
    # The lock first, then the events: a writer that ends while a long file is read has written its
    # end record before it let go of the lock, so it is read as ended, never as killed.
    alive, since = (False, None) if own_lock else writer_alive(path, launch)
    ends = read_ends(primary_events_file(path), sessions)
    info.error = ends.damaged or info.error
    state = fold(ends.records())
    _take_state(info, state, launch.get("launched"))
    if script_run:  # the loop's own epochs, as its start record said them (none: it did not say)
        said = (state.start or {}).get("epochs")
        info.epochs = said if isinstance(said, int) and not isinstance(said, bool) else None
    # its start record said it (config.toml not rewritten), or said more: what [amp.layers] did to the model
    if state.precision is not None and (not info.precision or state.precision.mix):
        info.precision, info.precision_words = state.precision.short, state.precision.words
    if applied and info.precision not in ("", "fp32"):  # who chose it: amptui, not the script ("bf16 applied")
        info.precision += " applied"
    if state.switches:  # the autopilot changed it mid-run: its segments
        info.precision = info.precision_words = state.segments
    if not own_lock and not alive and not state.ended:
        alive, since = writer_alive(path, launch)  # a session that began while the events were read
    end_t = (state.end or {}).get("t") or 0
    if alive and (not state.ended or since is None or since > end_t):
        info.status = "running"  # a live writer; a resumed session may not have written its start yet
        info.duration_s = state.clock.seconds(time.time())
    else:
        info.status = state.status if state.ended else "killed"
        if info.error:  # config.toml unreadable: whatever its events say, the run cannot be used
            info.status = "damaged"
        info.error = state.error_text() or info.error
    return info


def _take_state(info: RunInfo, state: RunState, launched: float | None) -> None:
    """The listing's figures from the folded records (config.toml's where they say nothing)."""
    info.started = state.started if state.start is not None else launched or None
    info.total_steps = state.total_steps
    if state.start is not None:
        info.world_size = state.start.get(START.world_size, info.world_size)
        info.dist = distribution.with_start(info.dist, state.start)
    info.step, info.epoch = state.step, state.epoch
    info.final_loss, info.val_acc = state.final_loss, state.val_acc
    info.hygiene = hygiene.said(state.warning_codes)
    info.nonfinite = state.nonfinite
    info.duration_s = state.clock.seconds()


def list_runs(root: Path) -> list[RunInfo]:
    """Every run under `root`, newest first."""
    if not root.is_dir():
        return []
    try:
        runs = [load_run(p) for p in root.iterdir()
                if RUN_ID_RE.match(p.name) and ".." not in p.name  # never listed unless addressable
                and p.is_dir() and not p.is_symlink() and RunFolder(p).is_run()]  # a link leads out: not a run here
    except PermissionError as exc:
        raise UserError(f"{root}: cannot read the runs folder ({exc.strerror})") from None
    runs.sort(key=lambda r: (r.started or 0, r.run_id), reverse=True)
    return runs
