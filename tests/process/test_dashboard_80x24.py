"""The real `amptui` in tmux at 80x24 (issue 45, item 4): home, run and compare screens show no word
cut in the middle. Each screen drops whole columns by priority (compare: loss and the speed-up
verdict first, as `amptui compare` on a narrow terminal) and shortens a line of words after a whole
word. The check reads the screens against the same screens drawn at 200x50, where nothing is cut.
Skipped when tmux is missing (.ci/run installs it with apt-get)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from support.dashboard import FAILED, FIXTURES, QUICK, SCALER
from support.tmux import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

AMPTUI = Path(sys.executable).parent / "amptui"
BORDERS = "│┃║"
WIDE = (200, 50)


def screens(tmp_path: Path, size: tuple[int, int]) -> dict[str, str]:
    """Home (the failed run's error under the list), compare of the three fixture runs, and the
    scaler-lab run's screen, as tmux shows them at `size`."""
    from support.shell import terminal_env

    runs = tmp_path / "runs"
    if not runs.exists():
        shutil.copytree(FIXTURES / "runs", runs)
    tmux = Tmux(tmp_path, terminal_env(tmp_path), *size)
    shot: dict[str, str] = {}
    try:
        tmux.type_line(f"{AMPTUI} --runs-dir {runs}")
        # Drawn whole: the runs, the failed run's error, the highlighted preset's description and the
        # toggles' summary ("→ autocast ..." or "→ fp32" where this CPU only emulates bfloat16). A
        # screen caught before the description is drawn would read as a cut (seen under load).
        shot["home"] = tmux.wait_for(lambda s: all(r[-4:] in s for r in (QUICK, SCALER, FAILED))
                                     and "RuntimeError" in s and "Small CNN on" in s
                                     and re.search(r"→ (autocast|fp32)", s) is not None, 90, "home")
        tmux.send("3")  # the Runs pane: mark all three (the highlighted failed run first), then c
        tmux.wait_for(lambda s: "Space" in s or "Mark" in s, 30, "the Runs pane's keys")
        for key in ("Space", "Down", "Space", "Down", "Space"):
            tmux.send(key)
        tmux.wait_for(lambda s: re.search(r"│ 3 ", s) is not None, 10, "three runs marked (numbered)")
        tmux.send("c")
        shot["compare"] = tmux.wait_for(lambda s: "comparing 3 runs" in s and "Loss (overlaid)" in s
                                        and "speed-up" in s and "%" in s.split("Loss (overlaid)")[1]
                                        # settled: the first paint may still show every column with a
                                        # scroll hint before the narrow layout drops some (seen under load)
                                        and "scroll" not in s, 90, "compare")
        tmux.send("q")
        tmux.wait_for(lambda s: "Presets" in s, 30, "home again")
        tmux.send("q")
        tmux.wait_for(lambda s: "Presets" not in s, 30, "the dashboard closed")
        tmux.type_line(f"{AMPTUI} --runs-dir {runs} watch {SCALER}")
        shot["run"] = tmux.wait_for(lambda s: "val acc" in s and "samples/s" in s and "scale" in s, 90, "run")
    finally:
        tmux.kill()
    return shot


def cut_words(narrow: str, wide: str) -> list[str]:
    """Fragments of `narrow` that end in the middle of a word: a visible cell (text after a border
    or a gap of two spaces) ending with a letter or digit right before a border or an ellipsis,
    where the same text in `wide` (nothing cut there) goes on with more of that word."""
    cuts = []
    for line in narrow.splitlines():
        for end in (m.start() for m in re.finditer(f"[…{BORDERS}]", line)):
            if end == 0 or not line[end - 1].isalnum():
                continue
            start = max(line.rfind(b, 0, end) for b in BORDERS)
            gap = line.rfind("  ", 0, end)
            fragment = line[max(start + 1, gap + 2 if gap >= 0 else 0):end].strip()
            ends = [i + len(fragment) for i in (m.start() for m in re.finditer(re.escape(fragment), wide))]
            if not ends or all(i < len(wide) and wide[i].isalnum() for i in ends):
                cuts.append(f"{fragment!r}{line[end]}  (in: {line.strip()!r})")
    return cuts


def test_home_run_and_compare_at_80x24_cut_no_word(tmp_path):
    narrow = screens(tmp_path / "narrow", (80, 24))
    wide = screens(tmp_path / "wide", WIDE)
    everything_wide = "\n".join(wide.values())
    cuts = {name: cut_words(shown, everything_wide) for name, shown in narrow.items()}
    assert not any(cuts.values()), (cuts, narrow)
    compare = narrow["compare"]
    head = next(line for line in compare.splitlines() if "#  precision" in line)
    # the headline figures without scrolling sideways: loss and the verdict first, then val acc
    assert head.index("loss @ step") < head.index("speed-up") < head.index("val acc"), head
    assert "scroll" not in compare and "can't tell" in compare
    assert "48.44%" in narrow["run"] and "48.44%" in compare  # scaler-lab's val acc
