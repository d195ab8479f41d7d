"""A refusal that depends only on the arguments comes before any work (issue 51.8 and its audit): each is
one clear line, exit 2, and nothing was started or written (no runs folder, no run). In process: the CLI's
main() with its output captured, so no refusal here waits on a sampled run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import one_clear_line

SCRIPT = str(Path(__file__).parent / "scripts" / "tiny_gpt.py")


def nothing_ran(runs_dir: Path) -> None:
    assert not runs_dir.exists() or not any(runs_dir.iterdir()), list(runs_dir.iterdir())


@pytest.mark.parametrize("args, said", [
    (("plan", "--script", SCRIPT, "--for", "H100", "--save", "mine"), "--save keeps a preset's plan"),
    (("plan", "plan-lab", "--for", "H100", "--save", "quickstart"), "'quickstart' is built in"),
    (("plan", "plan-lab", "--for", "H100", "--save", "a/b"), "no path separators"),
    (("plan", "plan-lab", "--for", "H100", "--verify"), "add --save NAME"),
])
def test_plan_refuses_from_its_arguments_before_sampling(cli, runs_dir, args, said):
    line = one_clear_line(cli(*args, "--runs-dir", str(runs_dir)))
    assert said in line
    nothing_ran(runs_dir)


def test_plan_help_says_save_is_for_presets(cli):
    out = cli("plan", "--help").stdout
    assert "presets only" in " ".join(out.split())
