"""Labels say who chose the precision (issue 41.6): a run whose AMP amptui applied to a script
(`run.apply_amp`, `amptui ab --script --variants`) is listed "bf16 applied" / "fp16+scaler applied",
never as if the script had chosen it. Run folders in the real format, read by the CLI in this process."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.paths import SCRIPTS

from amptui.core.config.values import read_toml

SCRIPT = SCRIPTS / "plain_fp32.py"


@pytest.mark.slow
def test_ab_variant_names_are_in_the_table_and_a_bf16_that_ran_in_float32_is_flagged(runs_dir):
    """`--variant NAME='ARGS'`: the A/B table names each run's variant; a variant named bf16 whose
    flag did nothing (the hooks saw no autocast) says it ran as fp32, in its row and under the table."""
    proc = amptui("ab", "--script", str(SCRIPT), "--variant", "fp32=--dtype float32", "--variant",
                  "bf16=--dtype float32", "--set", "log.every=2", "--", "--steps", "4", check=True)
    table = proc.stdout.split("\n\n")
    rows = [line for line in proc.stdout.splitlines() if line.startswith("2026") or line[:1].isdigit()]
    assert any("--variant fp32" in r and "ran as" not in r for r in rows), proc.stdout
    assert any("--variant bf16: ran as fp32" in r for r in rows), proc.stdout
    assert "warning: --variant bf16: ran as fp32" in proc.stdout, table
    # saved in the runs: a later `amptui compare` names them as the A/B did
    ids = sorted(d.name for d in runs_dir.iterdir() if (d / "config.toml").is_file())
    assert [read_toml(runs_dir / i / "config.toml")["run"]["variant"] for i in ids] == ["fp32", "bf16"]
    later = amptui("compare", *ids, "--runs-dir", str(runs_dir), check=True).stdout
    assert "--variant fp32" in later and "--variant bf16: ran as fp32" in later, later
