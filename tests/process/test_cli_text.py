"""The command line's sentences on a terminal: wrapped at word boundaries to its width (doctor,
notes, errors, `--help`), exactly as written in a pipe; doctor's rates in a unit that reads, and
its speed ratio with an unmistakable direction."""

from __future__ import annotations

import pytest
from support.screens import amptui_on_terminal, screen_lines

pytestmark = pytest.mark.timeout(120)


@pytest.mark.slow
@pytest.mark.parametrize("cols", [60])
def test_doctor_on_a_narrow_terminal_wraps_at_words(cli, cols):
    plain = cli("doctor", "--no-bench", check=True).stdout
    code, drawn = amptui_on_terminal("doctor", "--no-bench", cols=cols, timeout=120)
    lines = screen_lines(drawn)
    assert code == 0 and lines, drawn
    assert not [line for line in lines if len(line) > cols], lines
    assert set(" ".join(lines).split()) == set(plain.split()), "every word whole, none cut at the edge"
