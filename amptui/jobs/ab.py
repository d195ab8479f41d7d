"""`amptui ab`'s one loop: the variants of a preset run one after another as one group, in the
terminal or (`--detach`, what the dashboard's `a` starts) in the background; both end the same
way: `done`, or `failed` naming the variants that did not complete.

Torch is imported only by the checks (core.prepare.preflight), never at import time.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amptui.core.config.presets import Preset
from amptui.core.errors import UserError
from amptui.core.run.runs import launch_identity
from amptui.jobs import groups as groupmod
from amptui.jobs import launch
from amptui.jobs.detached import relaunch

LONG_AB_S = 300.0  # an A/B estimated to take longer is confirmed first, with a shorter setting offered

# How one started variant is followed until it ends: (run folder, its trainer, 1-based index,
# variant name) -> 0 completed, 130 interrupted (the A/B ends there), anything else failed.
Follow = Callable[[Path, subprocess.Popen, int, str], int]


@dataclass
class Outcome:
    """How an A/B ended, said one way for the terminal, the group file and the dashboard."""

    total: int
    run_dirs: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # a failed variant's error, as its run recorded it
    interrupted: bool = False
    cancelled: bool = False  # `S` / `amptui stop GROUP`: no further variant started

    @property
    def state(self) -> str:
        if self.cancelled:
            return "stopped"
        return "failed" if self.failed or self.interrupted else "done"

    @property
    def error(self) -> str:
        if self.cancelled:
            return f"cancelled after {len(self.run_dirs)} of {self.total} variants"
        if self.interrupted:
            return f"interrupted after {len(self.run_dirs)} of {self.total} variants"
        if self.failed:  # each reason once, with the variants that ended with it
            by_reason: dict[str, list[str]] = {}
            for name in self.failed:
                by_reason.setdefault(self.why.get(name, ""), []).append(name)
            return "; ".join(f"variant(s) {', '.join(names)} " + (f"failed: {reason}" if reason else "did not complete")
                             for reason, names in by_reason.items())
        return ""

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted or self.cancelled else (1 if self.failed else 0)


def start_here(root: Path, preset: Preset, preset_ref: str, overrides: dict[str, Any],
               variants_spec: str | None) -> groupmod.Group:
    """A group driven by this process (`amptui ab` in a terminal)."""
    import os

    return groupmod.create(root, preset_ref, preset.name, overrides, variants_spec,
                           lambda group: launch_identity(os.getpid()))


def start_detached(root: Path, preset: Preset, preset_ref: str, overrides: dict[str, Any],
                   variants_spec: str | None, argv: Sequence[str]) -> tuple[groupmod.Group, int]:
    """`amptui ab ... --detach`: the same command line, started in the background as the driver of
    a new group (`--group ID`); returns the group and the driver's pid."""
    started: list[int] = []

    def driver(group: groupmod.Group) -> dict[str, Any]:
        proc = relaunch(argv, ["--group", group.group_id, "--runs-dir", str(Path(root).resolve())], group.log)
        started.append(proc.pid)
        return launch_identity(proc.pid)

    group = groupmod.create(root, preset_ref, preset.name, overrides, variants_spec, driver)
    return group, started[0]


def run_variants(group: groupmod.Group, preset: Preset, overrides: dict[str, Any],
                 variants: list[tuple[str, dict[str, object]]], root: Path, follow: Follow) -> Outcome:
    """Create and run each variant in turn (each recorded in the group as soon as its folder
    exists); the group ends with the outcome's state and error."""
    group.update(state="running", variants=[name for name, _ in variants])
    outcome = Outcome(total=len(variants))
    for i, (name, variant) in enumerate(variants, 1):
        if group.cancel_requested:  # cancelled (groups.cancel): no further variant starts
            outcome.cancelled = True
            break
        run_dir, _ = launch.create_run(preset, {**overrides, **variant}, root)
        outcome.run_dirs.append(run_dir)
        group.update(runs=group.runs + [run_dir.name])
        code = follow(run_dir, launch.start(run_dir), i, name)
        if group.cancel_requested:  # this variant was asked to stop with the whole A/B
            outcome.cancelled = True
            break
        if code == 130:  # Ctrl-C: the A/B ends here; the variants after this one are not started
            outcome.interrupted = True
            break
        if code != 0:
            outcome.failed.append(name)
            outcome.why[name] = failure_words(run_dir)
    group.update(state=outcome.state, error=outcome.error)
    return outcome


# How interleaved variants are followed until all have ended: (run folders, their trainers, a tick
# to call as often as the follower looks) -> one code per variant, as Follow's.
FollowAll = Callable[[list[Path], list[subprocess.Popen], Callable[[], None]], list[int]]


def run_interleaved(group: groupmod.Group, names: list[str], create: Callable[[int], Path],
                    start: Callable[[int, Path, dict[str, str]], subprocess.Popen], follow_all: FollowAll) -> Outcome:
    """`ab --interleave` (a preset's variants, or a script's): every variant's process started at
    once, taking turns one step record at a time (core/run/turns.py), so their timed windows alternate.
    `create(i)` makes variant i's run folder, `start(i, folder, env)` its process with the turn
    variable in `env`. The tick retires a variant whose process has ended, so a crash never leaves
    the others waiting for its turn."""
    from amptui.core.run import turns

    group.update(state="running", variants=list(names))
    outcome = Outcome(total=len(names))
    run_dirs = []
    for i in range(len(names)):  # every folder made (and checked) before the first process starts
        run_dir = create(i)
        run_dirs.append(run_dir)
        outcome.run_dirs.append(run_dir)
        group.update(runs=group.runs + [run_dir.name])
    turn_file = group.path.with_suffix(".turn").absolute()  # as named, never resolved: no link is followed
    try:
        turns.start(turn_file, len(names))
    except OSError as exc:
        raise UserError(f"cannot start the A/B's turn file: {exc}") from None
    procs: list[subprocess.Popen] = []
    try:
        for i, run_dir in enumerate(run_dirs):
            procs.append(start(i, run_dir, {turns.TURN_ENV: f"{i} {turn_file}"}))

        def tick() -> None:
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    turns.retire(turn_file, i)

        codes = follow_all(run_dirs, procs, tick)
    finally:
        turn_file.unlink(missing_ok=True)  # a trainer still waiting trains on alone rather than for ever
    for name, run_dir, code in zip(names, run_dirs, codes, strict=True):
        if code == 130:
            outcome.interrupted = True
        elif code != 0:
            outcome.failed.append(name)
            outcome.why[name] = failure_words(run_dir)
    outcome.cancelled = group.cancel_requested
    group.update(state=outcome.state, error=outcome.error)
    return outcome


def interleave_refusal(dist_mode: str) -> str | None:
    """Why `ab --interleave` (a preset's or a script's) cannot apply, in one line, or None."""
    if dist_mode != "none":
        return (f"ab --interleave: one process per variant only, and dist.mode = {dist_mode} runs several "
                "(several GPUs or ranks); drop --interleave")
    return None


def failure_words(run_dir: Path) -> str:
    """Why a variant failed, as its run's end record says it ("ModuleNotFoundError: ..."), or ""
    (killed, stopped: it did not complete)."""
    from amptui.core.run.runs import load_run

    info = load_run(run_dir)
    return info.error if info.status == "failed" else ""


def script_ab_args(run_dir: Path, runs_root: Path, verb: str = "ab", *options: str) -> tuple[list[str] | None, str]:
    """The dashboard's `a` on a script run: (`ab --script FILE --detach --runs-dir ROOT -- ARGS`,
    what it says) with the arguments the run recorded, or (None, why not) when the run names no
    script or its arguments are not recorded. `t` asks the same of verb "tune" (its `options`:
    the budget)."""
    from amptui.core.config import values as cfgmod
    from amptui.core.errors import ConfigError
    from amptui.core.run.runfiles import RunFolder
    from amptui.core.run.runs import read_launch_info, recorded_script_args
    from amptui.jobs.detached import DETACH

    try:
        script = cfgmod.build_config(cfgmod.read_toml(RunFolder(run_dir).config)).run.script
    except (ConfigError, OSError):
        script = ""
    what = "A/B" if verb == "ab" else verb
    if not script or script.startswith("-m "):
        return None, f"{run_dir.name} runs no script file: highlight a preset (or a --script run) for its {what}"
    args = recorded_script_args(read_launch_info(run_dir).get("command"))
    if args is None:
        return None, (f"{run_dir.name}: its script's arguments are not recorded (started by torchrun or its own "
                      f"launcher); {what} it from a terminal: amptui {verb} --script {script} -- ARGS")
    said = " ".join(args) if args else "no arguments"
    return [verb, "--script", script, DETACH, "--runs-dir", str(runs_root), *options,
            *(["--", *args] if args else [])], f"the {what} of {Path(script).name} with its recorded arguments ({said})"
