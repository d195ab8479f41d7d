"""What a user's script does with precision, found before any `amptui ab --script` variant runs:
the script, as written, under the hooks in a throw-away run folder until its first optimizer step
(telemetry/scripthooks/probe.py ends it there), within PROBE_S. A script that does not get that
far in time (loading data, a long first epoch) is not judged: the variants' own hooks still refuse
what they see."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from amptui.core.config import values as cfgmod
from amptui.core.config.scriptsets import PROBE_ENV
from amptui.core.run import runlock
from amptui.core.run.runfiles import RUN_DIR_ENV, RunFolder
from amptui.jobs import launch

PROBE_S = 60.0  # at most this long; a plain loop gets to its first step in a few seconds


def probe_script(script: str, script_args: list[str], overrides: dict[str, Any]) -> dict[str, Any] | None:
    """{"autocast": [...], "scaler": bool, "optimizer_step": bool, "backward_calls": int}, or None
    where the script ended or ran past PROBE_S before its first step (or is a torchrun script)."""
    with tempfile.TemporaryDirectory(prefix="amptui-probe-") as tmp:
        probe_overrides = {k: v for k, v in overrides.items() if k != "run.apply_amp"}
        run_dir, _ = launch.create_run(None, {**probe_overrides, "run.script": script}, Path(tmp))
        cfg = RunFolder(run_dir).load_config()
        if cfg.dist.mode in cfgmod.TORCHRUN_MODES:
            return None
        found = Path(tmp) / "probe.json"
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{PROBE_ENV: str(found), RUN_DIR_ENV: str(run_dir)})
        env.pop(runlock.FD_ENV, None)  # the probe takes its own folder's lock
        try:
            subprocess.run(launch.trainer_command(cfg, run_dir, False, script_args), env=env, timeout=PROBE_S,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)
        except subprocess.TimeoutExpired:  # subprocess.run killed it
            return None
        try:
            seen = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return seen if isinstance(seen, dict) else None
