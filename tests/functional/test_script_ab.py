"""`amptui ab --script`: the A/B table for the user's own script. Its variants chosen by the
script's own flags (--variant NAME='ARGS'), or AMP applied by amptui to its unmodified fp32 loop
(--variants: autocast around its model's forward, a GradScaler around its backward, clip and step).
A script that sets its own precision is refused for the latter in one line. The loops are tiny:
this CPU's bfloat16/float16 speed does not matter here, only what was applied and recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import one_clear_line
from support.paths import SCRIPTS

from amptui.jobs import groups

SCRIPT = SCRIPTS / "plain_fp32.py"


def _nothing_left(runs_dir: Path) -> bool:
    """No run folder and no A/B group (the probe's own folder is a temporary one)."""
    return not runs_dir.exists() or (groups.groups(runs_dir) == [] and not [d for d in runs_dir.iterdir() if d.is_dir()])


def test_a_script_run_without_recorded_arguments_says_so(tmp_path):
    """A run its own torchrun started records no `scriptrun ... ARGS` command: `a` says so."""
    from amptui.core.config import values as cfgmod
    from amptui.core.run import runs
    from amptui.core.run.runfiles import RunFolder
    from amptui.core.run.runs import recorded_script_args
    from amptui.jobs.ab import script_ab_args

    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    runs.write_new(RunFolder(run_dir), cfgmod.build_config({}, {"run.script": str(SCRIPT)}), "# test")
    args, said = script_ab_args(run_dir, tmp_path / "runs")
    assert args is None and "arguments are not recorded" in said and f"amptui ab --script {SCRIPT}" in said
    assert recorded_script_args(["python", "-u", "-m", "amptui.trainer.scriptrun", "RUN", "t.py", "--lr", "1"]) == \
        ["--lr", "1"]
    assert recorded_script_args(["torchrun", "--nproc-per-node", "2", "t.py"]) is None


@pytest.mark.parametrize("extra, said", [
    (["--variant", "bf16=--dtype bfloat16", "--variants", "bf16"], "not both"),
    (["--variants", "fp32,tf32"], "--variants tf32"),
    (["--variants", "bf16", "--set", "run.apply_amp=fp16"], "--set run.apply_amp"),
    (["--variant", "=--dtype bfloat16"], "give NAME='ARGS'"),
    (["--variants", "bf16", "--set", "amp.dtype=float16"], "--set amp.dtype"),
])
def test_ab_script_refusals_are_one_line_and_leave_nothing(cli, runs_dir, extra, said):
    line = one_clear_line(cli("ab", "--script", str(SCRIPT), *extra))
    assert said in line, line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_ab_script_estimate_starts_nothing(cli, runs_dir, tmp_path):
    """`ab --script ... --estimate` starts nothing, as with a preset (issue 45.1): the script is not
    run only to time it, and says so."""
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = cli("ab", "--script", str(script), "--variants", "fp32,bf16", "--estimate", check=True)
    assert proc.stdout.strip() == "estimate: none (a script of your own is not run just to time a step)", proc.stdout
    assert not marker.exists()
    assert _nothing_left(runs_dir)
    found = json.loads(cli("ab", "--script", str(script), "--estimate", "--format", "json", check=True).stdout)
    assert found["kind"] == "estimate" and "error" in found and not marker.exists()
