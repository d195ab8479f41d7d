"""Precision hygiene raises no false alarm (issue 53): the built-in presets through the real Trainer,
and the real-shaped scripts amptui watches (tests/scripts) under the hooks, every step sampled,
say none of its findings."""

from __future__ import annotations

import pytest
import torch
from support.scripthooks import record_script

from amptui.core import hygiene

pytestmark = pytest.mark.timeout(600)

SAMPLED = {"numerics.hygiene_every": 1}


def hygiene_codes(recs) -> dict[str, str]:
    return {r["code"]: r["message"] for r in recs if r["kind"] == "warning" and r.get("code") in hygiene.CODES}


SCRIPTS = [
    ("amp_recipe.py", "--steps", "6", "--epochs", "1"),
    ("amp_recipe.py", "--dtype", "bfloat16", "--no-scaler", "--steps", "6", "--epochs", "1"),
    ("amp_recipe.py", "--accumulate", "2", "--steps", "6", "--epochs", "1"),
    ("tiny_gpt.py", "--steps", "6", "--width", "32"),
    ("plain_fp32.py", "--steps", "6"),
    ("plain_fp32.py", "--steps", "6", "--dtype", "bfloat16"),
    ("plain_fp32.py", "--steps", "6", "--dtype", "float16"),
    ("loader_eval.py",),
    ("loss_outside.py",),
    ("gan.py",),
    ("wgan.py", "--iters", "4", "--dtype", "float16"),
    ("wgan.py", "--iters", "4", "--dtype", "bfloat16"),
    ("saves_model.py", "."),
    ("zero_norm.py",),
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: "-".join(s).replace("--", ""))
def test_the_watched_scripts_raise_no_hygiene_finding(runs_dir, tmp_path, monkeypatch, script):
    monkeypatch.chdir(tmp_path)  # a script that saves writes here
    run_dir, recs, error = record_script(runs_dir, script[0], *script[1:], log_every=2, sets=SAMPLED)
    assert error is None or isinstance(error, SystemExit) and not error.code, error
    assert [r for r in recs if r["kind"] == "step"], "no step recorded"
    assert hygiene_codes(recs) == {}


def test_an_fsdp2_script_computing_in_its_policy_raises_no_finding(runs_dir, tmp_path):
    run_dir, recs, error = record_script(runs_dir, "fsdp_train.py", "--store", str(tmp_path / "store"),
                                         "--steps", "4", log_every=2, sets=SAMPLED)
    assert error is None or isinstance(error, SystemExit) and not error.code, error
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    assert hygiene_codes(recs) == {}
