"""A refusal that depends only on the arguments comes before any work (issue 51.8 and its audit): each is
one clear line, exit 2, and nothing was started or written (no runs folder, no run). In process: the CLI's
main() with its output captured, so no refusal here waits on a sampled run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import one_clear_line
from support.paths import SCRIPTS

SCRIPT = str(SCRIPTS / "tiny_gpt.py")


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


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="asserts a box without CUDA refusing run.device=cuda")
def test_a_detached_tune_refuses_a_preset_this_machine_cannot_run_before_it_detaches(cli, runs_dir):
    """The refusal came from the detached tune, into its log, with exit 0 here; now it is this command's."""
    proc = cli("tune", "quickstart", "--budget", "1", "--detach", "--set", "run.device=cuda", "--runs-dir", str(runs_dir))
    assert "cuda" in one_clear_line(proc).lower()
    nothing_ran(runs_dir)


def test_tune_refuses_a_winner_name_it_could_not_save_before_the_search(cli, runs_dir, tmp_path):
    long = tmp_path / f"{'x' * 60}.toml"
    long.write_text('[run]\nmax_steps = 2\n')
    line = one_clear_line(cli("tune", str(long), "--budget", "1", "--runs-dir", str(runs_dir)))
    assert f"{'x' * 60}-tuned" in line and "--no-save" in line
    nothing_ran(runs_dir)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="asserts a box without CUDA refusing run.device=cuda")
def test_a_detached_ab_refuses_what_this_machine_cannot_run_before_it_detaches(cli, runs_dir):
    """DataParallel on a box without 2 GPUs: the detached A/B said so in its log, after exit 0 here."""
    proc = cli("ab", "quickstart", "--detach", "--set", "dist.mode=dp", "--runs-dir", str(runs_dir))
    assert "needs at least 2 GPUs" in one_clear_line(proc)
    nothing_ran(runs_dir)
