"""A/B groups: which runs of the runs folder are one A/B (`amptui ab`, from the CLI or the dashboard).

<runs>/.ab/<group>.json holds the group: its preset, its variants, its runs (each recorded as soon
as its folder exists), its state (checking | running | done | failed | stopped, with the error
that names what failed) and the process that drives it; <group>.cancel asks it to end (`cancel`). <runs>/.ab/<group>.log is a detached group's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amptui.core import safefile
from amptui.core.config.presets import atomic_write_text
from amptui.core.errors import UserError
from amptui.core.fmt import fmt_of
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runs import process_alive

GROUPS_DIR = ".ab"
ACTIVE_STATES = ("checking", "running")
_MAX_GROUP_BYTES = 1024 * 1024


@dataclass
class Group:
    group_id: str
    path: Path
    preset: str                      # the preset's name
    preset_ref: str = ""             # how it was named to `amptui ab` (a name or a path)
    label: str = ""                  # ab1, ab2, ... in the order the groups were made
    state: str = "checking"
    runs: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    variants_spec: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    launch: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0             # unix seconds: groups are labelled in this order

    @property
    def log(self) -> Path:
        return self.path.with_suffix(".log")

    @property
    def cancel_file(self) -> Path:
        """Written by `cancel` (another process): the driver starts no further variant."""
        return self.path.with_suffix(".cancel")

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_file.exists()

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES and process_alive(self.launch)

    def save(self) -> None:
        data = {"preset": self.preset_ref, "preset_name": self.preset, "overrides": self.overrides,
                "variants_spec": self.variants_spec, "runs_root": str(self.path.parent.parent.resolve()),
                **{k: v for k, v in asdict(self).items() if k in ("state", "runs", "variants", "error", "launch", "created")}}
        try:
            atomic_write_text(self.path, json.dumps(data, indent=2) + "\n")
        except OSError as exc:  # a full disk, a quota: one line, as `run` says it
            raise UserError(f"cannot write the A/B's group file {self.path}: {exc.strerror or exc}") from None

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self.save()

    @contextlib.contextmanager
    def recording(self) -> Iterator[Group]:
        """Whatever ends the A/B early (a refused variant, Ctrl-C, a crash) ends the group `failed`
        with the reason, so no group is left `running` by a process that is gone."""
        try:
            yield self
        except UserError as exc:
            self._failed(str(exc))
            raise
        except KeyboardInterrupt:
            self._failed(f"interrupted after {fmt_of(len(self.runs), len(self.variants))} variants")
            raise
        except Exception as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            raise

    def _failed(self, error: str) -> None:
        """Record the failure if the disk lets us (the reason itself is said anyway)."""
        with contextlib.suppress(UserError):
            self.update(state="failed", error=error)


def _read(path: Path) -> Group | None:
    try:
        data = safefile.load_json(path, _MAX_GROUP_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    listed = lambda key: [str(x) for x in data.get(key) or [] if isinstance(x, str)]  # noqa: E731

    def mapping(key: str) -> dict[str, Any]:
        value = data.get(key)
        return value if isinstance(value, dict) else {}

    return Group(group_id=path.stem, path=path, preset=str(data.get("preset_name", "")),
                 preset_ref=str(data.get("preset", "")), state=str(data.get("state", "failed")),
                 runs=listed("runs"), variants=listed("variants"), variants_spec=data.get("variants_spec"),
                 overrides=mapping("overrides"), error=str(data.get("error") or ""), launch=mapping("launch"),
                 created=created if isinstance(created := data.get("created"), (int, float)) else 0.0)


def groups(root: Path) -> list[Group]:
    """Every A/B group in the runs folder, oldest first, labelled ab1, ab2, ..."""
    folder = Path(root) / GROUPS_DIR
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    found = sorted((g for g in map(_read, paths) if g is not None), key=lambda g: (g.created, g.group_id))
    for i, group in enumerate(found, 1):
        group.label = f"ab{i}"
    return found


def cancel(root: Path, group: Group) -> list[str]:
    """End a whole A/B: no further variant starts (the driver reads the cancel file before each),
    and its running variant is asked to stop (checkpoint first); the group then ends `stopped`.
    Returns the runs asked to stop. A file rather than a signal, like a run's stop: the driver may
    be this terminal's `amptui ab` or a detached one."""
    from amptui.core.run.runs import load_run
    from amptui.core.safefile import atomic_write_text
    from amptui.jobs.launch import request_stop

    if not group.active:
        raise UserError(f"A/B {group.label or group.group_id} is not running ({group.state})")
    atomic_write_text(group.cancel_file, f"{time.time()}\n")
    stopped = []
    for run_id in group.runs:
        run_dir = Path(root) / run_id
        if load_run(run_dir).status == "running":
            request_stop(run_dir)
            stopped.append(run_id)
    return stopped


def find(root: Path, group_id: str) -> Group:
    found = next((g for g in groups(root) if g.group_id == group_id), None)
    if found is None:
        raise UserError(f"no A/B group {group_id!r} in {Path(root) / GROUPS_DIR}")
    return found


def newest_group_runs(root: Path) -> list[Path]:
    """The run folders of the newest A/B group in `root` (CLI and dashboard groups alike), in the
    order they ran; a UserError when there is none or none of its runs exists."""
    found = groups(root)
    if not found:
        raise UserError(f"--last-ab: no A/B in {root} yet (start one with `amptui ab PRESET`)")
    group = found[-1]
    dirs = [Path(root) / r for r in group.runs if RunFolder(Path(root) / r).is_run()]
    if not dirs:
        raise UserError(f"--last-ab: A/B {group.label} of {group.preset} has no runs yet ({group.state})")
    return dirs


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One group created at a time in a runs folder (so two starts cannot both find none running)."""
    with safefile.open_file(folder / ".lock", "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def create(root: Path, preset_ref: str, preset_name: str, overrides: dict[str, Any], variants_spec: str | None,
           driver: Callable[[Group], dict[str, Any]]) -> Group:
    """Make a new group and start what drives it: `driver(group)` returns its process's launch
    identity ({"pid", "create_time", "host"}). Refuses a second A/B of the same preset while one
    is running (they would share the device and spoil each other's timings)."""
    folder = Path(root) / GROUPS_DIR
    made = not os.path.lexists(folder)
    with contextlib.ExitStack() as held:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            held.enter_context(_locked(folder))
        except OSError as exc:  # the folder or its lock file (a full disk, a read-only folder)
            _remove_new(folder, made)
            raise UserError(f"cannot start an A/B in {root}: {exc.strerror or exc}") from None
        running = next((g for g in groups(root) if g.preset == preset_name and g.active), None)
        if running is not None:
            raise UserError(f"an A/B of {preset_name} is already running ({running.label}: "
                            f"{fmt_of(len(running.runs), len(running.variants))} runs started); wait for it")
        group_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{preset_name}-{os.urandom(2).hex()}"
        group = Group(group_id=group_id, path=folder / f"{group_id}.json", preset=preset_name, preset_ref=preset_ref,
                      overrides=dict(overrides), variants_spec=variants_spec, created=time.time())
        try:
            group.save()
        except UserError as exc:  # a full disk: nothing started yet, and nothing is left behind
            _remove_new(folder, made)
            raise UserError(f"cannot start an A/B in {root}: {str(exc).rpartition(': ')[2]}") from None
        try:
            group.update(launch=driver(group))
        except BaseException as exc:
            group._failed(f"could not start the A/B: {exc}")
            raise
    return find(root, group_id)


def _remove_new(folder: Path, made: bool) -> None:
    """Undo a group start that wrote nothing: the .ab folder and its lock file, if this start made them."""
    if made:
        with contextlib.suppress(OSError):
            (folder / ".lock").unlink(missing_ok=True)
            folder.rmdir()
