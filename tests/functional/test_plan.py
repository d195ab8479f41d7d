"""`amptui plan` (issue 44): the planner's choices against its rules (core/planning/plan.py, no torch), the
probe on a tiny plan-lab model (telemetry/plan_probe.py: the outlier linear found, nothing hooked
between sampled steps), and the command end to end on a tiny plan-lab."""

from __future__ import annotations

import pytest

from amptui.core.planning import plan as planner
from amptui.core.planning import roofline

BIG = {"m": 16384, "k": 8192, "n": 8192}    # gains from float8 on an H100 by any roofline


def layer(name: str, order: int, shape: dict, fp8: float = 29.0, rowwise: float = 30.0, mxfp8: float = 31.0,
          bf16: float = 51.0) -> dict:
    def f8(db: float) -> dict:
        return {"runs": True, "sqnr_db": db, "grad_input_sqnr_db": db + 1, "grad_weight_sqnr_db": db + 2,
                "underflow": {"input": 0.0, "weight": 0.0, "grad_output": 0.0}}
    return {"name": name, "order": order, "calls": 1, **shape,
            "bf16": {"rel_error": 10 ** (-bf16 / 20), "sqnr_db": bf16},
            "fp16": {"headroom_forward": 10.0, "headroom_grad": 20.0, "rel_error": 1e-4, "sqnr_db": 70.0,
                     "underflow": {"input": 0.0, "weight": 0.0, "grad_output": 0.0}},
            "fp8": f8(fp8), "fp8-rowwise": f8(rowwise), "mxfp8": f8(mxfp8)}


def plan_of(layers: list[dict], device: str = "h100", **kw) -> planner.Plan:
    return planner.make_plan([{"kind": "plan_sample", "step": 6, "layers": layers}], roofline.roof_for(device), **kw)


def by_name(plan: planner.Plan) -> dict[str, planner.LayerPlan]:
    return {x.name: x for x in plan.layers}


def test_ab_variant_plan_name_runs_a_saved_plans_layers_beside_all_bf16():
    from amptui.core.config import presets
    from amptui.core.config.variants import expand
    from amptui.core.errors import UserError

    base = presets.find_preset("plan-lab").config()
    presets.save_preset("lab-planned", base.with_overrides({"amp.layers": {"hidden.0": "fp8-rowwise",
                                                                             "outlier": "bf16"}}))
    (bf16, plain), (planned, layers) = expand("bf16,plan:lab-planned", "cpu")
    assert (bf16, planned) == ("bf16", "plan:lab-planned")
    assert plain["amp.layers"] == {} and plain["amp.dtype"] == "bfloat16"
    assert layers["amp.layers"] == {"hidden.0": "fp8-rowwise", "outlier": "bf16"} and layers["amp.dtype"] == "bfloat16"
    with pytest.raises(UserError, match=r"plan:plan-lab: preset 'plan-lab' has no \[amp.layers\]"):
        expand("bf16,plan:plan-lab", "cpu")


def test_a_saved_plan_is_named_as_saved_not_as_its_preset(isolated):
    """Issue 51 (small): a saved plan kept `run.name = "plan-lab"`, so its runs were listed as plan-lab's."""
    from argparse import Namespace

    from amptui.cli import plan as plan_cli
    from amptui.core.config import presets

    plan = plan_of([layer("hidden.0", 0, BIG)])
    plan_cli.save("lab-mine", presets.find_preset("plan-lab"), None, plan, Namespace(sets=[], script=None))
    saved = presets.find_preset("lab-mine").config()
    assert saved.run.name == "lab-mine" and dict(saved.amp.layers) == {"hidden.0": by_name(plan)["hidden.0"].choice}


def test_a_script_plan_samples_exactly_its_steps(runs_dir):
    """Issue 51 (small): `plan --script --steps 24` sampled 25-26 steps (a stop file polled after the last
    sample); the hooks now stop the script after exactly run.max_steps steps."""
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "plain_fp32.py", "--steps", "9", log_every=5,
                                         sets={"run.max_steps": 4, "numerics.plan_every": 2})
    end = recs[-1]
    assert end["kind"] == "end" and end["steps"] == 4 and end["status"] == "stopped", (end, error)
    assert [r["step"] for r in recs if r["kind"] == "plan_sample"] == [2, 4]
