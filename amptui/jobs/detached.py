"""`--detach`: the line a background start prints, and the one way to start one and read it.

`amptui run|resume|ab|tune ... --detach` starts its work with `spawn.spawn` and prints exactly one
line on stdout: a JSON object, {"kind": "run"|"resume"|"ab"|"tune", the id ("run_id", "group_id"
or "tune_id"), "pid", "log", ...}. Words for a person go to stderr. A refusal prints nothing on
stdout, one `amptui: error: ...` line on stderr, and exits non-zero (2 for a user error).

The dashboard starts all its background work through `start` (torch is imported only in the
child `amptui`, never in the dashboard).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from amptui.core.run.runops import toml_value
from amptui.jobs.spawn import amptui_python, spawn

DETACH = "--detach"
KINDS = ("run", "resume", "ab", "tune")


def announce(kind: str, hint: str = "", **ids: Any) -> None:
    """Print a detached start's JSON line (stdout) and, for a person, `hint` (stderr)."""
    if hint:
        print(hint, file=sys.stderr, flush=True)
    print(json.dumps({"kind": kind, **{k: str(v) if isinstance(v, Path) else v for k, v in ids.items()}}),
          flush=True)


def read_announcement(stdout: str) -> dict[str, Any] | None:
    """The JSON line of a detached start's output (its last one), or None."""
    for line in reversed(stdout.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("kind") in KINDS:
            return found
    return None


def read_notes(stderr: str) -> list[str]:
    """The `note: ...` lines a detached start wrote for a person (the dashboard shows them)."""
    return [line.removeprefix("note: ").strip() for line in stderr.splitlines() if line.startswith("note: ")]


def relaunch(argv: Sequence[str], extra: Sequence[str], log: Path) -> subprocess.Popen:
    """This very `amptui` command line, less --detach, plus `extra`, started in the background."""
    args = [a for a in argv if a != DETACH]
    return spawn([*amptui_python(), "-m", "amptui", *args, *extra], log)


def amptui_args(sub: str, preset_ref: str, overrides: Mapping[str, Any], *extra: str) -> list[str]:
    """`SUB PRESET --detach EXTRA --set KEY=VALUE...`: a detached start's arguments for `start`."""
    command = [sub, preset_ref, DETACH, *extra]
    for key, value in overrides.items():
        command += ["--set", f"{key}={toml_value(value)}"]
    return command


def ask(args: Sequence[str], kind: str, timeout: float = 600) -> tuple[dict[str, Any] | None, str | None]:
    """Run `amptui ARGS` (a question such as `ab --estimate --format json`, nothing started) and
    read its JSON line of `kind`: (the answer, None) or (None, why not)."""
    try:
        proc = subprocess.run([*amptui_python(), "-m", "amptui", *args], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not run amptui: {exc}"
    if proc.returncode == 0:
        for line in reversed(proc.stdout.splitlines()):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict) and found.get("kind") == kind:
                return found, None
        return None, f"amptui {args[0]} printed no {kind} line"
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return None, (lines[-1] if lines else f"amptui {args[0]} exited with {proc.returncode}").removeprefix("amptui: error: ")


def start(args: Sequence[str], timeout: float = 180) -> tuple[dict[str, Any] | None, str | None]:
    """Run `amptui ARGS` (a --detach start): (what it started, None) or (None, why it was refused)."""
    if DETACH not in args:
        raise ValueError(f"not a detached start: {' '.join(args)}")
    command = [*amptui_python(), "-m", "amptui", *args]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not start amptui: {exc}"
    if proc.returncode == 0:
        started = read_announcement(proc.stdout)
        if started is None:
            return None, f"amptui {args[0]} printed no start line"
        return {**started, "notes": read_notes(proc.stderr)}, None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    message = lines[-1] if lines else f"amptui {args[0]} exited with {proc.returncode}"
    return None, message.removeprefix("amptui: error: ")
