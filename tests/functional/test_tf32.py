"""TF32: `amp.tf32` (auto / true / false), set with torch's current API where it exists and read back
whichever API answers; the `tf32` A/B variant (CUDA only: one line, exit 2 on a CPU); the start
record's state; the fp32 baseline's TF32 in compare and tune; doctor's line."""

from __future__ import annotations

import pytest
from support.cli import one_clear_line
from support.records import record, write_records

from amptui.core.comparison import comparenotes, runsummary
from amptui.core.stream.records import End, Start

pytestmark = pytest.mark.timeout(300)


def test_ab_tf32_on_a_cpu_is_one_line_exit_2_and_leaves_nothing(cli, runs_dir):
    line = one_clear_line(cli("ab", "mlp-recipe", "--variants", "fp32,tf32"))
    assert "--variants tf32" in line and "CUDA" in line and "CPU" in line
    assert not runs_dir.exists() or not any(runs_dir.rglob("*"))
    one_clear_line(cli("ab", "mlp-recipe", "--variants", "fp32,tf32", "--detach"))
    assert not runs_dir.exists() or not any(runs_dir.rglob("*"))


def test_ab_refuses_setting_amp_tf32_itself(cli):
    line = one_clear_line(cli("ab", "quickstart", "--set", "amp.tf32=true"))
    assert "amp.tf32" in line and "--variants" in line


# --- said where the fp32 baseline is judged ------------------------------------------------------

ON_A100 = {"matmul": False, "cudnn": True, "api": "fp32_precision", "supported": True}


def canned(root, name, precision, tf32_state):
    run = root / name
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "canned"\n')
    write_records(run / "events.jsonl", [
        record(Start(run_id=name, preset="canned", config={}, precision=precision, world_size=1,
                     device={"type": "cuda", "name": "A100", "count": 1}, torch="2.x", host="h", pid=1,
                     tf32=tf32_state), 1.0),
        record(End(status="completed", total_time_s=1.0, steps=1, final_loss=0.1, val_acc=None), 2.0)])
    return run


def test_compare_says_whether_the_fp32_baseline_used_tf32(tmp_path):
    fp32 = runsummary.summarize(canned(tmp_path, "a", "fp32", ON_A100))
    amp = runsummary.summarize(canned(tmp_path, "b", "autocast float16 + GradScaler", ON_A100))
    assert any(n.startswith("fp32 baseline a: TF32 matmuls off") for n in comparenotes.notes([fp32, amp]))
    assert not any("TF32" in n for n in comparenotes.notes([amp, fp32]))  # the first run is not fp32
