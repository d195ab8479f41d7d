"""`amptui plan` (issue 44): the planner's choices against its rules (core/planning/plan.py, no torch), the
probe on a tiny plan-lab model (telemetry/plan_probe.py: the outlier linear found, nothing hooked
between sampled steps), and the command end to end on a tiny plan-lab."""

from __future__ import annotations

import pytest

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
