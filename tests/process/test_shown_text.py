"""Issue 50.6: text that came from a runs folder (preset names, descriptions, error messages, log
lines, a saved preset) reaches no terminal raw. A crafted run (tests/support/crafted.py: an OSC
title, a screen clear, colours, Rich markup, a bidi override, U+2028) is drawn on every screen and
table it appears on, printed by every command that names it, and shown in tmux, whose pane title
it tries to change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.crafted import FORBIDDEN, write_crafted_preset, write_crafted_run
from support.dashboard import QUICK


def raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in FORBIDDEN.findall(text)})


@pytest.fixture
def crafted(root, tmp_path):
    """The canned runs plus the crafted run, and the crafted saved preset."""
    write_crafted_preset(tmp_path / "config")
    return write_crafted_run(root)


@pytest.mark.slow
def test_compare_svg_of_a_crafted_run_holds_no_control_character(root, crafted):
    done = subprocess.run([sys.executable, "-m", "amptui", "compare", QUICK, crafted.name, "--format", "svg",
                           "--runs-dir", str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "evil" in done.stdout
    assert raw_controls(done.stdout) == []


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_crafted_run_leaves_the_tmux_pane_title_and_screen_as_they_were(tmp_path, root, crafted):
    """The issue's case: the home screen's run table (and `compare --format csv`, `runs`) set the pane
    title through an OSC sequence and cleared the screen on every redraw."""
    from support.tmux import Tmux

    amptui = Path(sys.executable).parent / "amptui"
    env = dict(os.environ, TERM="xterm-256color", XDG_CONFIG_HOME=str(tmp_path / "config"),
               AMPTUI_RUNS_DIR=str(root), PATH=f"{amptui.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("TMUX", None)
    tmux = Tmux(tmp_path, env, width=160, height=40)
    try:
        before = tmux.title()
        assert "PWNED" not in before
        tmux.type_line(f"{amptui}")
        tmux.wait_for(lambda s: "Presets" in s and "evil" in s, 120, "the home screen listing the crafted run")
        assert tmux.title() == before
        tmux.send("q")
        tmux.wait_for(lambda s: "Presets" not in s, 60, "the dashboard gone")
        tmux.type_line(f"{amptui} compare {QUICK} {crafted.name} --format csv; {amptui} runs; echo DONE-$((6*7))")
        shell = tmux.wait_for(lambda s: "DONE-42" in s, 120, "the commands done")
        assert "evil" in shell and tmux.title() == before
    finally:
        tmux.kill()
