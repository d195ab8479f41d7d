"""Scripts under the hooks: `record_script` runs tests/scripts/SCRIPT in this process as `amptui run --script`
does, `record_script_process` in a process of its own (for scripts that may crash, race or hang)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from amptui.jobs import launch
from amptui.telemetry import scripthooks
from amptui.trainer import scriptrun
from support.paths import SCRIPTS
from support.records import events


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


def record_script(runs_dir: Path, script: str, *args: str, log_every: int = 5, sets: dict | None = None):
    """Run tests/scripts/SCRIPT under the hooks, as `amptui run --script` does (`sets`: its --set
    keys): (run folder, its records, the exception the script ended with or None)."""
    path = SCRIPTS / script
    run_dir, _ = launch.create_run(None, {"run.script": str(path), "log.every": log_every, **(sets or {})}, runs_dir)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    error = None
    try:
        scriptrun.main([str(run_dir), str(path), *args], install_hooks=scripthooks.install)
    except BaseException as exc:  # noqa: BLE001 -- the script's own ending, checked by the test
        error = exc
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path
    return run_dir, events(run_dir), error


def record_script_process(runs_dir: Path, script: str, *args: str, log_every: int = 5, sets: dict | None = None,
                          timeout: float = 180, env: dict | None = None):
    """Run tests/scripts/SCRIPT under the hooks in a process of its own, exactly as `amptui run --script`
    starts it (`python -m amptui.trainer.scriptrun RUN_DIR SCRIPT ARGS`): for scripts that may crash, race
    or hang (threads, signals), which must not take the test runner down with them. Returns (run folder,
    its records, the finished process); a script killed by a signal fails the test naming the signal.
    `record_script` runs the same bootstrap in this process, for scripts that cannot crash it.
    `env`: variables set on top of this process's environment."""
    import signal
    import subprocess

    path = SCRIPTS / script
    run_dir, _ = launch.create_run(None, {"run.script": str(path), "log.every": log_every, **(sets or {})}, runs_dir)
    proc = subprocess.run([sys.executable, "-m", "amptui.trainer.scriptrun", str(run_dir), str(path), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=run_dir.parent,
                          env=None if env is None else {**os.environ, **env})
    if proc.returncode < 0:
        raise AssertionError(f"{script} died of {signal.Signals(-proc.returncode).name}\n{proc.stderr[-3000:]}")
    return run_dir, events(run_dir), proc


def warnings_by_code(recs):
    return {r.get("code"): r["message"] for r in by_kind(recs, "warning")}
