"""events.jsonl as a hostile or unlucky folder holds it (issue 24 finding 7, issue 27): a FIFO, a
link to /dev/zero, a 50 MB torn line. Nothing hangs (every test under a timeout), memory stays
bounded, and the run shows as damaged or counts the line as bad."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.cli import amptui
from support.dashboard import FIXTURES, QUICK


def _run(root: Path, name: str) -> Path:
    run = root / f"20990101-000000-{name}"
    shutil.copytree(FIXTURES / "runs" / QUICK, run)
    return run


@pytest.fixture
def hostile_root(tmp_path) -> Path:
    """A runs folder with one good run, one whose events.jsonl is a FIFO, one linked to /dev/zero."""
    root = tmp_path / "hostile"
    _run(root, "good")
    fifo = _run(root, "fifo") / "events.jsonl"
    fifo.unlink()
    os.mkfifo(fifo)
    zero = _run(root, "zero") / "events.jsonl"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    return root


@pytest.mark.slow  # a real `amptui runs`
@pytest.mark.timeout(120)
def test_amptui_runs_does_not_hang_on_a_fifo_or_dev_zero(hostile_root):
    proc = amptui("runs", "--format", "json", "--runs-dir", str(hostile_root), timeout=90)
    assert proc.returncode == 0, proc.stderr
    errors = {r["run_id"].rsplit("-", 1)[1]: r["error"] for r in json.loads(proc.stdout)}
    assert "not a regular file" in errors["fifo"] and "symbolic link" in errors["zero"]
    assert errors["good"] == ""
