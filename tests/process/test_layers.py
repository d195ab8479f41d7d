"""The layers hold: core (no torch, Textual or trainer at import time) < telemetry < trainer and
the Monitor; the dashboard sees core only. `lint-imports` checks the contracts in pyproject.toml
(it sees imports inside functions too, so core's lazy torch imports are named there); the tests
below check what a real interpreter loads."""

from __future__ import annotations

import json
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

import amptui.core

HEAVY = ("torch", "torchvision", "textual", "amptui.trainer", "amptui.dashboard", "amptui.telemetry")


def _tool(name: str) -> str:
    """A console script of this interpreter's environment (where `pip install .[test]` put it)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def _env() -> dict[str, str]:
    """This checkout first on the path, so the tools look at the code under test."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def _loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running `code`."""
    probe = code + ("\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules "
                    f"if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=_env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_import_contracts_are_kept():
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_every_core_module_imports_without_torch_textual_or_the_trainer():
    names = sorted(m.name for m in pkgutil.walk_packages(amptui.core.__path__, "amptui.core."))
    assert "amptui.core.run.runs" in names and "amptui.core.prepare.preflight" in names
    loaded = _loaded_after("import importlib\n" + "".join(f"importlib.import_module({n!r})\n" for n in names))
    assert loaded == [], f"importing amptui.core loads {loaded}"


@pytest.mark.slow
def test_amptui_help_does_not_import_torch():
    loaded = _loaded_after("import contextlib, io, sys\nfrom amptui.cli import main as cli\n"
                           "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
                           "    cli.main(['--help'])\n")
    assert loaded == [], f"`amptui --help` loads {loaded}"
