"""The command line's sentences on a terminal: wrapped at word boundaries to its width (doctor,
notes, errors, `--help`), exactly as written in a pipe; doctor's rates in a unit that reads, and
its speed ratio with an unmistakable direction."""

from __future__ import annotations

import io
import re

import pytest

from amptui.cli import prose

pytestmark = pytest.mark.timeout(120)

COMMANDS = ["", "run", "resume", "stop", "watch", "ab", "tune", "compare", "runs", "runs delete", "export",
            "doctor", "presets", "presets save", "presets delete", "keys", "serve", "slurm", "numerics"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("cols", [60, 70, 80, 90, 100])
def test_every_help_fits_the_terminal(cli, monkeypatch, cols):
    monkeypatch.setenv("COLUMNS", str(cols))
    for command in COMMANDS:
        text = cli(*command.split(), "--help", check=True).stdout
        too_wide = [line for line in text.splitlines() if len(line) > cols]
        assert not too_wide, (command, too_wide)
        cut = re.findall(r"\S*\w-\n\s*\S+", text)  # "PRESET-" / "tuned": a name a user types, cut at its hyphen
        assert not cut, (command, cut)
    top = cli("--help", check=True).stdout
    assert "amptui export RUN_ID > run.csv" in top and "examples:" in top


def test_an_error_wraps_on_a_terminal_and_stays_one_line_in_a_pipe(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    piped = cli("run", "no-such-preset")
    assert piped.returncode == 2 and len(piped.stderr.splitlines()) == 1
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    prose.error(piped.stderr.removeprefix("amptui: error: ").strip())
    lines = err.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 50 for line in lines)
    assert lines[0].startswith("amptui: error: no preset named") and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(err.getvalue().split()) == " ".join(piped.stderr.split())
