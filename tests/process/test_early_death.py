"""A trainer that dies before its first record (issue 43): `run` and `ab` report it `failed` with the
last lines of its own output, never "running / not seen" and "did not complete".

The real case: amptui importable only through the working folder (its source tree, not installed).
The CLI runs (`python -m amptui` puts the working folder on the path); the trainer it starts does
not (amptui starts its children with -P, so a folder named amptui where the user stands is never
imported as amptui) and dies at `python -m amptui.trainer`. Real processes, so `slow`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import amptui
from amptui.core.run.runs import list_runs

pytestmark = pytest.mark.slow

SOURCE_TREE = Path(amptui.__file__).resolve().parents[1]


@pytest.fixture
def python_without_amptui(tmp_path) -> str:
    """A Python with this one's packages (torch, rich, ...) but not amptui, except from the
    working folder: a venv whose .pth lists this interpreter's package folders, leaving out any
    that holds amptui itself (an editable install's finder is a .pth hook, not processed there)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    folders = [p for p in sys.path if p and Path(p).is_dir() and p != str(SOURCE_TREE)
               and not (Path(p) / "amptui").exists() and "site-packages" in p]
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()
    (Path(site) / "packages.pth").write_text("\n".join(folders) + "\n")
    probe = subprocess.run([python, "-P", "-c", "import torch, rich\ntry:\n import amptui\nexcept ImportError:\n"
                            " print('ok')"], capture_output=True, text=True, timeout=300, cwd=SOURCE_TREE)
    if probe.stdout.strip() != "ok":  # amptui installed beside torch: no way to leave it out here
        pytest.skip(f"cannot make a Python with torch but without amptui here: {probe.stderr[-300:]}")
    return python


def amptui_from_source_tree(python: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "amptui", *args], cwd=SOURCE_TREE, capture_output=True, text=True,
                          timeout=600)


def test_run_reports_a_trainer_that_cannot_import_amptui_as_failed_with_its_output(python_without_amptui, runs_dir):
    done = amptui_from_source_tree(python_without_amptui, "run", "quickstart", "--set", "run.max_steps=2",
                                   "--runs-dir", str(runs_dir))
    assert done.returncode == 1, done.stderr
    assert "without an end record" not in done.stderr
    assert "failed" in done.stdout
    assert "before its first record" in done.stderr and "No module named 'amptui'" in done.stderr
    (info,) = list_runs(runs_dir)
    assert info.status == "failed" and "No module named 'amptui'" in info.error


def test_ab_reports_each_variant_that_died_before_its_first_record(python_without_amptui, runs_dir):
    done = amptui_from_source_tree(python_without_amptui, "ab", "quickstart", "--variants", "fp32,bf16",
                                   "--set", "run.max_steps=2", "--runs-dir", str(runs_dir))
    assert done.returncode == 1, done.stderr
    assert "did not complete" not in done.stderr
    assert "variant(s) fp32, bf16 failed: " in done.stderr and "No module named 'amptui'" in done.stderr
    table = done.stdout.split("again later")[0]
    assert " running " not in table and table.count(" failed ") == 2
    assert [info.status for info in list_runs(runs_dir)] == ["failed", "failed"]
