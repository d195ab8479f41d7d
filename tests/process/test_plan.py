"""`amptui plan` (issue 44): the planner's choices against its rules (core/planning/plan.py, no torch), the
probe on a tiny plan-lab model (telemetry/plan_probe.py: the outlier linear found, nothing hooked
between sampled steps), and the command end to end on a tiny plan-lab."""

from __future__ import annotations

import json

import pytest
from support.paths import SCRIPTS

from amptui.core.planning import plan as planner


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_amptui_plan_of_a_tiny_plan_lab_lists_every_layer_and_keeps_the_outlier_out_of_float8(runs_dir):
    from support.cli import amptui

    proc = amptui("plan", "plan-lab", "--for", "H100", "--format", "json", "--steps", "4", "--save", "tiny-lab",
                  "--verify", "--set", "model.width=64", "--set", "model.depth=4", "--set", "data.batch_size=32",
                  timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    names = [x["name"] for x in doc["layers"]]
    assert names == ["inp", "hidden.0", "outlier", "head"] and doc["samples"] == 4
    assert doc["device"]["name"].startswith("H100") and doc["predicted_speedup"] is not None
    by = {x["name"]: x for x in doc["layers"]}
    assert min(by, key=lambda n: by[n]["recipes"]["fp8"]["sqnr_db"]) == "outlier"
    assert by["outlier"]["choice"] not in planner.FLOAT8 and by["outlier"]["reason"]
    for x in doc["layers"]:
        assert set(x["recipes"]) == {"bf16", "fp16", "fp8", "fp8-rowwise", "mxfp8"}
        assert x["shape"] == {"m": 32, "k": 64, "n": 64} and 0 < x["flops_share"] <= 1
    # --save: the plan as [amp.layers]; --verify: its A/B against all-bf16, loss beside the prediction
    from amptui.core.config import presets

    assert dict(presets.find_preset("tiny-lab").config().amp.layers) == {x["name"]: x["choice"] for x in doc["layers"]}
    check = doc["verify"]
    assert check["predicted_speedup"] == doc["predicted_speedup"] and len(check["runs"]) == 2
    assert check["loss"]["bf16"] is not None and check["loss"]["plan"] is not None and check["device"] == "cpu"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_amptui_plan_of_an_unmodified_gpt_script_gives_the_same_table(runs_dir):

    from support.cli import amptui

    script = SCRIPTS / "tiny_gpt.py"
    proc = amptui("plan", "--script", str(script), "--for", "H100", "--format", "json", "--steps", "4",
                  "--", "--steps", "6", timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    names = [x["name"] for x in doc["layers"]]
    assert names[0] == "blocks.0.qkv" and names[-1] == "head" and len(names) == 9 and doc["samples"] >= 2
    for x in doc["layers"]:
        assert set(x["recipes"]) == {"bf16", "fp16", "fp8", "fp8-rowwise", "mxfp8"} and x["choice"] and x["reason"]
    assert doc["too_small"] == names  # width 64: nothing gains on an H100, and each is said so
