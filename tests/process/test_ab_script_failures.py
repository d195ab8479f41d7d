"""`ab --script` where a variant fails or trains nothing (issue 51 item 10): the failed variant's
recorded error is printed with its name, its row shows no figures, and an A/B in which nothing trained
exits non-zero saying so. Real processes, a tiny loop."""

from __future__ import annotations

import json

import pytest
from support.cli import amptui
from support.paths import SCRIPTS

SCRIPT = SCRIPTS / "plain_fp32.py"

TRAINS_NOTHING = """\
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
print("built the model; no training today")
"""


@pytest.mark.slow
def test_a_failed_variant_says_its_recorded_error_and_shows_no_figures(runs_dir):
    proc = amptui("ab", "--script", str(SCRIPT), "--variant", "ok=", "--variant", "bad=--dtype nonsense",
                  "--format", "json", "--", "--steps", "4", timeout=400)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert ("variant(s) bad failed: SystemExit: exit code 2: plain_fp32.py: error: argument --dtype: invalid "
            "choice: 'nonsense'") in proc.stderr
    ok, bad = json.loads(proc.stdout[proc.stdout.index("[\n"):])
    assert ok["status"] == "completed" and ok["steps"] == 4 and ok["speedup"] == 1.0
    assert bad["status"] == "failed" and bad["steps"] == 0
    assert (bad["speedup"], bad["memory_saving"], bad["total_time_s"], bad["samples_per_s"], bad["peak_mem"]) == \
        (None, None, None, None, None)


@pytest.mark.slow
def test_an_ab_where_nothing_trained_exits_non_zero_and_says_why(runs_dir, tmp_path):
    script = tmp_path / "nothing.py"
    script.write_text(TRAINS_NOTHING)
    proc = amptui("ab", "--script", str(script), "--variant", "a=", "--variant", "b=", timeout=400)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "variant(s) a, b failed: it recorded no training step" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr
