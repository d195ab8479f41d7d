"""`amptui plan` (issue 44): the planner's choices against its rules (core/planning/plan.py, no torch), the
probe on a tiny plan-lab model (telemetry/plan_probe.py: the outlier linear found, nothing hooked
between sampled steps), and the command end to end on a tiny plan-lab."""

from __future__ import annotations

import json

import pytest
from support.paths import SCRIPTS

from amptui.core.planning import plan as planner
from amptui.core.planning import roofline

BIG = {"m": 16384, "k": 8192, "n": 8192}    # gains from float8 on an H100 by any roofline
SMALL = {"m": 64, "k": 64, "n": 64}         # too small to gain on any GPU


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


def test_plan_choices_follow_the_rules_floor_gain_edges_and_fp32():
    floor = planner.Rules().sqnr_floor_db
    plan = plan_of([
        layer("embed", 0, BIG, fp8=floor + 1, rowwise=floor + 1, mxfp8=floor + 1),  # first: above floor, not margin
        layer("safe", 1, BIG),
        layer("outlier", 2, BIG, fp8=7.0, rowwise=10.8, mxfp8=11.3),               # under the floor everywhere
        layer("tiny", 3, SMALL),                                                  # safe but too small to gain
        layer("fragile", 4, BIG, fp8=5.0, rowwise=5.0, mxfp8=5.0, bf16=20.0),      # even bf16 under its floor
        layer("head", 5, BIG, fp8=45.0, rowwise=45.0, mxfp8=45.0),                 # last, measured safe by margin
    ])
    x = by_name(plan)
    assert x["embed"].choice == "bf16" and "first/last linear" in x["embed"].reason
    assert x["safe"].choice in planner.FLOAT8 and "lowest SQNR" in x["safe"].reason
    assert x["outlier"].choice == "bf16" and "SQNR floor" in x["outlier"].reason and "fp8 7.0 dB" in x["outlier"].reason
    assert x["tiny"].choice == "bf16" and "too small to gain" in x["tiny"].reason and plan.too_small == ["tiny"]
    assert x["fragile"].choice == "fp32" and "bf16 SQNR 20.0 dB" in x["fragile"].reason
    assert x["head"].choice in planner.FLOAT8 and "measured safe" in x["head"].reason
    # the step's prediction: faster than all-bf16, never more than its linears' GEMMs; risk = lowest kept SQNR
    assert plan.gemm_speedup is not None and plan.predicted_speedup is not None
    assert 1.0 < plan.predicted_speedup <= plan.gemm_speedup
    assert plan.risk is not None and plan.risk["layer"] == "safe" and plan.risk["lowest_sqnr_db"] == 30.0


def test_plan_picks_the_fastest_safe_recipe_and_only_those_the_gpu_has():
    # an H100 has no MXFP8 GEMM: mxfp8's better SQNR does not make it a choice there
    h100 = by_name(plan_of([layer("a", 0, SMALL), layer("mid", 1, BIG, fp8=25.0, rowwise=26.0, mxfp8=40.0),
                            layer("z", 2, SMALL)]))
    assert h100["mid"].choice in ("fp8", "fp8-rowwise") and h100["mid"].speedup["mxfp8"] is None
    # an A100 has no float8 GEMM at all: bf16, said so
    a100 = by_name(plan_of([layer("a", 0, SMALL), layer("mid", 1, BIG), layer("z", 2, SMALL)], device="a100"))
    assert a100["mid"].choice == "bf16" and "no float8" in a100["mid"].reason


def test_plan_takes_the_worst_of_its_samples_and_saves_exact_names():
    first = layer("blocks.0.mlp[1]", 1, BIG, fp8=30.0)
    second = layer("blocks.0.mlp[1]", 1, BIG, fp8=12.0)
    second["fp16"]["underflow"]["grad_output"] = 0.25
    plan = planner.make_plan([{"step": 3, "layers": [layer("a", 0, SMALL), first, layer("z", 2, SMALL)]},
                              {"step": 6, "layers": [layer("a", 0, SMALL), second, layer("z", 2, SMALL)]}],
                             roofline.roof_for("h100"))
    mid = by_name(plan)["blocks.0.mlp[1]"]
    assert mid.recipes["fp8"]["sqnr_db"] == 12.0 and mid.recipes["fp16"]["underflow"]["grad_output"] == 0.25
    assert plan.samples == 2 and plan.steps == [3, 6]
    table = planner.layer_table(plan)
    assert table["blocks.0.mlp[[]1]"] == mid.choice  # an fnmatch pattern that matches that name only
    import fnmatch

    assert fnmatch.fnmatchcase("blocks.0.mlp[1]", "blocks.0.mlp[[]1]")
    doc = planner.as_json(plan)
    assert set(doc["layers"][1]["recipes"]) == {"bf16", "fp16", "fp8", "fp8-rowwise", "mxfp8"}
    assert {g["gemm"] for g in doc["layers"][1]["gemms"]} == {"forward", "grad_input", "grad_weight"}


def test_probe_finds_the_outlier_linear_and_hooks_nothing_between_sampled_steps():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from amptui.telemetry.plan_probe import PlanProbe
    from amptui.trainer.planlab import PlanLab

    torch.manual_seed(0)
    model = PlanLab(width=64, depth=4)
    probe = PlanProbe(model, every=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    samples = []
    for step in (1, 2, 3):
        probe.prepare(step)
        hooked = sum(len(m._forward_hooks) for _, m in probe.layers)
        assert hooked == (len(probe.layers) if step == 2 else 0)  # a step that is not sampled runs no hook
        model(torch.randn(32, 64)).pow(2).mean().backward()
        optimizer.step()
        samples.append(probe.step_done())
    assert samples[0] is None and samples[2] is None and all(not m._forward_hooks for _, m in probe.layers)
    layers = {x["name"]: x for x in samples[1]}
    assert list(layers) == ["inp", "hidden.0", "outlier", "head"]
    worst = min(layers, key=lambda n: layers[n]["fp8"]["sqnr_db"])
    assert worst == "outlier" and layers["outlier"]["fp8"]["sqnr_db"] < 20 < layers["hidden.0"]["fp8"]["sqnr_db"]
    for figures in layers.values():
        assert figures["m"] == 32 and figures["k"] == figures["n"] == 64
        assert figures["bf16"]["sqnr_db"] > 40 and figures["fp16"]["headroom_forward"] is not None
        for recipe in ("fp8", "fp8-rowwise", "mxfp8"):
            assert figures[recipe]["runs"] and figures[recipe]["grad_weight_sqnr_db"] is not None
        assert set(figures["mxfp8"]["worst_block"]) == {"input", "weight", "grad_output"}


def test_every_float8_recipe_measures_its_own_grad_input_on_a_float32_capture():
    """A float32 run's captured input is the recipes' float32 already: each recipe's grad input is its
    own, not added to the ones measured before it (rowwise read 0 dB and MXFP8 -6 dB on a CPU)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from amptui.telemetry.plan_probe import float8_figures

    torch.manual_seed(0)
    x, w, grad = torch.randn(32, 64), torch.randn(64, 64) / 8, torch.randn(32, 64)
    y, grads = x @ w.t(), (grad @ w, grad.t() @ x)
    figures = {r: float8_figures(r, x, w, y, grad, grads) for r in ("tensorwise", "rowwise", "mxfp8")}
    assert x.grad is None
    assert all(f["grad_input_sqnr_db"] > 20 for f in figures.values()), figures


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


def test_roofline_matches_a_hand_calculation_for_two_shapes():
    h100 = roofline.roof_for("H100-SXM")
    assert h100 is roofline.roof_for("h100") and h100.peak_tflops["bf16"] == 989.4 and h100.mem_gbs == 3350.0
    # 8192^3 in bf16: compute-bound, 2 * 8192^3 FLOPs at 989.4 TFLOP/s
    assert roofline.gemm_seconds(h100, 8192, 8192, 8192, "bf16") == pytest.approx(2 * 8192 ** 3 / 989.4e12)
    # 64 x 4096 x 4096 in fp8: memory-bound, (64*4096 + 4096*4096) inputs at 1 byte + 3 bytes of cast each,
    # the 64 x 4096 output at 2 bytes, over 3350 GB/s
    moved = (64 * 4096 + 4096 * 4096) * 4 + 64 * 4096 * 2
    assert roofline.gemm_seconds(h100, 64, 4096, 4096, "fp8") == pytest.approx(moved / 3350e9)
    assert roofline.gemm_speedup(h100, 64, 4096, 4096, "fp8") < 1 < roofline.gemm_speedup(h100, 8192, 8192, 8192, "fp8")
    with pytest.raises(Exception, match="unknown GPU 'H900'.*H100 SXM"):
        roofline.roof_for("H900")


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
    from test_scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "plain_fp32.py", "--steps", "9", log_every=5,
                                         sets={"run.max_steps": 4, "numerics.plan_every": 2})
    end = recs[-1]
    assert end["kind"] == "end" and end["steps"] == 4 and end["status"] == "stopped", (end, error)
    assert [r["step"] for r in recs if r["kind"] == "plan_sample"] == [2, 4]
