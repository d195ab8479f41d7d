"""ruff on amptui (the rules and line length in pyproject.toml) and mypy (check_untyped_defs) on all of amptui."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

pytestmark = pytest.mark.slow  # ruff and mypy run as processes of their own



def _tool(name: str) -> str:
    """A console script of this interpreter's environment (where `pip install .[test]` put it)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def _run(*command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


def test_ruff_finds_nothing_in_amptui():
    proc = _run(_tool("ruff"), "check", "--no-cache", "amptui")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing_in_amptui():
    # files, options: [tool.mypy] in pyproject.toml. The cache is mypy's own in the checkout (.mypy_cache, git
    # ignores it), the one a developer's `mypy` keeps: checked afresh, torch's stubs take minutes on a 2-core box;
    # with the cache, seconds (mypy checks again every file whose contents or options changed)
    proc = _run(_tool("mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
