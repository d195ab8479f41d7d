"""Pictures people trust: axes in steps and the unit's own numbers, plots inside their frames at any
size, compare's "is the accuracy the same?", and SVGs that leave the terminal and render elsewhere."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from support.pictures import RESUMED, write_resumed_run, write_twin_runs


def _amptui(*args, cwd):
    return subprocess.run([sys.executable, "-m", "amptui", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_compare_format_svg_writes_an_svg_that_renders(tmp_path):
    first, second = write_twin_runs(tmp_path / "runs")
    proc = _amptui("compare", first.name, second.name, "--runs-dir", "runs", "--format", "svg", "--size", "100x30",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = proc.stdout
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "Loss" in svg and "overlaid" in svg
    (tmp_path / "compare.svg").write_text(svg)
    if shutil.which("rsvg-convert") is None:
        pytest.skip("rsvg-convert is not installed (apt-get install librsvg2-bin)")
    png = tmp_path / "compare.png"
    render = subprocess.run(["rsvg-convert", str(tmp_path / "compare.svg"), "-o", str(png)], capture_output=True,
                            text=True, timeout=60)
    assert render.returncode == 0, render.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_watch_svg_draws_the_run_screen_headless_and_refuses_a_bad_size(tmp_path):
    write_resumed_run(tmp_path / "runs")
    out = tmp_path / "run.svg"
    proc = _amptui("watch", RESUMED, "--runs-dir", "runs", "--svg", str(out), "--size", "80x24", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and "160/160" in svg.replace("&#160;", " ")
    bad = _amptui("watch", RESUMED, "--runs-dir", "runs", "--svg", str(tmp_path / "x.svg"), "--size", "9x9",
                  cwd=tmp_path)
    assert bad.returncode == 2 and "--size" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.svg").exists()
