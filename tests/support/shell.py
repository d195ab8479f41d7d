"""A user's shell for the dashboard in tmux (`terminal_env`): the venv's amptui (AMPTUI) on PATH, a 256-colour
terminal, runs in ./runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

AMPTUI = Path(sys.executable).parent / "amptui"


def terminal_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell: the venv's amptui on PATH, a 256-colour terminal, runs in ./runs."""
    env = dict(os.environ, TERM="xterm-256color", XDG_CONFIG_HOME=str(tmp_path / "config"), COLORTERM="",
               PATH=f"{AMPTUI.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("AMPTUI_RUNS_DIR", None)
    env.pop("TMUX", None)
    return env
