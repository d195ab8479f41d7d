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
from amptui.core.errors import UserError
from amptui.core.run import checkpoints

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


def test_the_weights_table_names_torchvision_files():
    """core/prepare/pretrained.py (no torch) holds the file names torchvision's weights download to."""
    from torchvision import models

    from amptui.core.prepare.pretrained import WEIGHTS, torchvision_weights

    for name, entry in WEIGHTS.items():
        assert Path(torchvision_weights(models, name).url).name == entry.file


# --- checkpoints/last.json: a resume check without torch ------------------------------------------

def _checkpoint(directory: Path, config: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    pt = directory / "last.pt"
    pt.write_bytes(b"tensors")
    checkpoints.write_info(directory, checkpoints.describe(
        {"progress": {"step": 7, "epoch": 1}, "config": config, "code": "x"}, pt))
    return pt


def test_last_json_describes_its_checkpoint_until_the_checkpoint_changes(tmp_path):
    config = {"model": {"name": "smallcnn"}, "optim": {"name": "sgd", "lr": 0.1}}
    pt = _checkpoint(tmp_path, config)
    info = checkpoints.read_info(tmp_path)
    assert info is not None and (info["step"], info["epoch"], info["config"]) == (7, 1, config)
    checkpoints.check_config_fits("r", info["config"], {**config, "optim": {"name": "sgd", "lr": 0.2}})
    try:
        checkpoints.check_config_fits("r", info["config"], {**config, "model": {"name": "mlp"}})
    except UserError as exc:
        assert "model.name 'smallcnn' -> 'mlp'" in str(exc)
    else:
        raise AssertionError("a structural change must be refused")
    pt.write_bytes(b"other tensors")  # damaged, copied or rewritten: only last.pt itself can tell now
    assert checkpoints.read_info(tmp_path) is None
    assert "describes another last.pt" in checkpoints.stale_reason(tmp_path)
    (tmp_path / "last.json").unlink()
    assert checkpoints.read_info(tmp_path) is None and "no last.json" in checkpoints.stale_reason(tmp_path)
