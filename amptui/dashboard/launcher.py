"""Detached starts through the `amptui` command line (torch is imported only in that child)."""

from __future__ import annotations

import subprocess
import sys


def amptui_detached(args: list[str]) -> tuple[str | None, str | None]:
    """Run `amptui ARGS` (a `--detach` start); (run id it printed, None) or (None, why it was refused)."""
    command = [sys.executable, "-m", "amptui", *args]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not start amptui: {exc}"
    if proc.returncode == 0:
        lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
        return (lines[-1].strip() if lines else None), None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    message = lines[-1] if lines else f"amptui {args[0]} exited with {proc.returncode}"
    return None, message.removeprefix("amptui: error: ")
