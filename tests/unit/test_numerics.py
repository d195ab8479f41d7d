"""Range headroom per layer ([numerics]) and the first non-finite module: the real Trainer in this
process on a tiny float16 + GradScaler model (scaler-lab's small CNN, width 8), with a large
activation put into a known module (forward) or a large gradient into one (backward)."""

from __future__ import annotations

import math

import pytest
from torch import nn

from amptui.core.numerics import describe_nonfinite, summarize
from amptui.telemetry.alarms import HeadroomAlarms
from amptui.telemetry.numerics import modules_at_depth

pytestmark = pytest.mark.timeout(300)


def test_modules_at_depth_include_shallow_leaves_and_look_through_wrappers():
    model = nn.Sequential()
    model.add_module("emb", nn.Embedding(4, 4))
    model.add_module("blocks", nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.GELU()), nn.Linear(4, 4)))
    assert [n for n, _ in modules_at_depth(model, 2)] == ["emb", "blocks.0", "blocks.1"]
    assert [n for n, _ in modules_at_depth(model, 1)] == ["emb", "blocks"]

    class Wrapper(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.module = inner
    assert [n for n, _ in modules_at_depth(Wrapper(model), 1)] == ["emb", "blocks"]


def test_headroom_alarm_after_several_narrow_samples():
    from amptui.core.stream.records import Numerics

    alarms = HeadroomAlarms("float16")
    narrow = [{"name": "blocks.3.ffn", "forward": 0.4, "grad": 20.0}, {"name": "head", "forward": 9.0}]
    said = [a for step in (10, 20, 30, 40) for a in alarms.observe([Numerics(step, "float16", 65504.0, narrow)])]
    assert len(said) == 1 and said[0].code == "low_headroom"
    assert said[0].message.startswith("blocks.3.ffn has 0.4 bits")
    assert "will overflow float16 soon: bfloat16, or scale this layer's init/output" in said[0].message


def test_summary_text_and_narrowest_layers():
    first = describe_nonfinite("encoder.3.ffn.out", "forward", "float16", 65504.0, 66246.0)
    assert first["text"] == "encoder.3.ffn.out (forward, float16 max exceeded: 6.6e4)"
    recs = [{"kind": "numerics", "step": s, "dtype": "float16", "max_finite": 65504.0,
             "layers": [{"name": "a", "forward": 9.0 - s}, {"name": "b", "forward": 12.0, "grad": 3.0}]}
            for s in (1, 2, 3)]
    summary = summarize(recs)
    assert [s.name for s in summary.narrowest()] == ["b", "a"] and summary.narrowest_bits == 3.0
    assert summary.rows["a"] == [8.0, 7.0, 6.0] and summary.steps == [1, 2, 3]
    assert math.isinf(summarize([{**recs[0], "layers": [{"name": "a", "nonfinite": "forward"}]}]).narrowest_bits)


def test_a_backoff_streak_after_growth_is_told_from_calibration_and_blamed_on_the_source():
    from amptui.telemetry.alarms import ScaleAlarms

    alarms = ScaleAlarms(growth_interval=4, dtype="float16", bf16_available=False)
    first = describe_nonfinite("blocks.3.mlp.proj", "forward", "float16", 65504.0, 3.8e5)
    said = alarms.observe([{"step": 4, "event": "growth", "old_scale": 2.0, "new_scale": 4.0}], 4, 4.0, 1.0)
    for step in range(5, 10):
        scale = 2.0 ** (6 - step)
        said += alarms.observe([{"step": step, "event": "backoff", "old_scale": 2 * scale, "new_scale": scale,
                                 "overflow": [], "first_nonfinite": first}], step, scale, 1.0)
    streak = [a.message for a in said if a.code == "backoff_streak"]
    assert len(streak) == 1 and "not calibration" in streak[0]
    assert "first non-finite: blocks.3.mlp.proj (forward, float16 max exceeded: 3.8e5)" in streak[0]
    # an activation out of range: no loss scale fixes it, so the advice is the wider dtype, not init_scale
    assert "use amp.dtype=bfloat16" in streak[0] and "Lower amp.init_scale" not in streak[0]


def test_compare_names_the_first_non_finite_layer_not_the_ones_downstream_of_it():
    """A model that registers its head before its blocks: head comes first in the records' (the
    model's) order, but blocks.1 overflowed and head only held the inf that flowed down from it.
    Compare and `amptui numerics` name blocks.1 as the source, head as downstream of it."""
    from amptui.cli.numerics import as_table
    from amptui.core.comparison import compare, comparenotes, runsummary

    first = describe_nonfinite("blocks.1.mlp", "forward", "float16", 65504.0, 2.0e5)
    summary = runsummary.RunSummary(run_id="r")
    for step in (1, 2):
        summary.add({"kind": "numerics", "rank": 0, "step": step, "dtype": "float16", "max_finite": 65504.0,
                     "layers": [{"name": "head", "forward": None, "grad": None, "nonfinite": "forward"},
                                {"name": "blocks.0", "forward": 6.5, "grad": None, "nonfinite": "backward"},
                                {"name": "blocks.1", "forward": None, "grad": None, "nonfinite": "forward"}],
                     "first_nonfinite": first})
    said = comparenotes.narrowest_headroom(summary)
    assert said == ("inf/NaN first in blocks.1.mlp (forward, float16 max exceeded: 2.0e5), "
                    "1 later layer downstream of it"), said
    assert compare.compare_rows([summary])[0].headroom_layer == "blocks.1"
    narrowest = next(line for line in as_table("r", summary.numerics).splitlines() if line.startswith("narrowest: "))
    assert narrowest == "narrowest: blocks.1 (inf/NaN; 1 later layer downstream of it), blocks.0 6.5 bits"



def _scaler_backoffs_then_a_forward_overflow(found_forward: bool):
    """A float16 + GradScaler run: steps 1-3 and 5 back the scale off (gradients too large at the
    start scale: backward starts in head, so head is each step's first non-finite, in backward);
    on step 4 blocks.3 overflows in its forward and head, after it, holds its inf. With
    `found_forward` step 4's record names blocks.3.mlp.proj; without, it names nothing."""
    from amptui.core.comparison import runsummary

    backoff = describe_nonfinite("head", "backward", "float16", 65504.0, None, scale=65536.0)
    overflow = describe_nonfinite("blocks.3.mlp.proj", "forward", "float16", 65504.0, 2.0e5)
    summary = runsummary.RunSummary(run_id="r")
    for step in range(1, 6):
        out = step == 4
        summary.add({"kind": "numerics", "rank": 0, "step": step, "dtype": "float16", "max_finite": 65504.0,
                     "layers": [{"name": "tok_emb", "forward": 12.0, "grad": None, "nonfinite": "backward"},
                                {"name": "blocks.3", "forward": None if out else 3.0, "grad": None,
                                 "nonfinite": "forward" if out else "backward"},
                                {"name": "head", "forward": None if out else 8.0, "grad": None,
                                 "nonfinite": "forward" if out else "backward"}],
                     "first_nonfinite": (overflow if found_forward else None) if out else backoff})
    return summary


def test_backward_findings_from_scale_backoffs_do_not_make_head_the_forward_source():
    """Head has four backward firsts (scale backoffs), blocks.3 one forward first (the overflow).
    The forward inf began in blocks.3: compare, `amptui numerics`' narrowest line and the heat map
    name it, with its own forward finding (not head's newer backward one), and head downstream."""
    from amptui.cli.numerics import as_json, narrowest_words
    from amptui.core.comparison import compare, comparenotes
    from amptui.dashboard.widgets.heatmap import legend_and_narrowest

    summary = _scaler_backoffs_then_a_forward_overflow(found_forward=True)
    said = comparenotes.narrowest_headroom(summary)
    assert said == ("inf/NaN first in blocks.3.mlp.proj (forward, float16 max exceeded: 2.0e5), "
                    "1 later layer downstream of it"), said
    assert compare.compare_rows([summary])[0].headroom_layer == "blocks.3"
    assert narrowest_words(summary.numerics) == ["blocks.3 (inf/NaN; 1 later layer downstream of it)", "tok_emb 12.0 bits"]
    legend = legend_and_narrowest(summary.numerics).plain
    assert "\ninf/NaN out: blocks.3 +1 downstream" in legend, legend
    # the table's `first` counts both directions: head's backoffs are steps it was first in too
    layers = {x["name"]: (x["first_nonfinite_count"], x["first_nonfinite_forward_count"])
              for x in as_json("r", summary.numerics)["layers"]}
    assert layers == {"tok_emb": (0, 0), "blocks.3": (1, 1), "head": (4, 0)}


def test_with_no_forward_finding_the_inf_layers_are_listed_not_ranked():
    """The same run with step 4's overflow not found (no replay): nothing says which layer's inf
    came first, and the records' order is the model's, not the one it ran in, so no layer is
    called downstream of another; each is listed, and the newest finding (a backward one) said."""
    from amptui.cli.numerics import narrowest_words
    from amptui.core.comparison import comparenotes
    from amptui.dashboard.widgets.heatmap import legend_and_narrowest

    summary = _scaler_backoffs_then_a_forward_overflow(found_forward=False)
    said = comparenotes.narrowest_headroom(summary)
    assert said == ("inf/NaN in 2 layers (blocks.3, head), "
                    "first non-finite: head (backward, float16 max exceeded at loss scale 2^16)"), said
    assert "downstream" not in said and ";" not in said  # compare joins the runs with "; "
    assert narrowest_words(summary.numerics) == ["blocks.3 (inf/NaN)", "head (inf/NaN)", "tok_emb 12.0 bits"]
    legend = legend_and_narrowest(summary.numerics).plain
    assert "\ninf/NaN out: blocks.3, head\n" in legend and "downstream" not in legend, legend


def test_headroom_alarm_counts_overflowed_samples_in_the_narrow_run():
    """A layer that swings between the edge and past it (numerics-lab's blocks.3) is the one to warn
    about: an inf/NaN sample keeps its run of narrow samples going instead of starting it again."""
    from amptui.core.stream.records import Numerics

    near = [{"name": "blocks.3", "forward": 0.05}]
    over = [{"name": "blocks.3", "nonfinite": "forward"}]

    def said(*samples):
        alarms = HeadroomAlarms("float16")
        return [a for step, layers in zip((10, 20, 30, 40), samples, strict=False)
                for a in alarms.observe([Numerics(step, "float16", 65504.0, layers)]) if a.code == "low_headroom"]

    swings = said(near, over, near, over)
    assert len(swings) == 1
    assert swings[0].message.startswith("blocks.3 has 0.1 bits of range headroom left (3 samples in a row under 1, "
                                        "up to step 30): will overflow float16 soon: bfloat16")
    overflowed = said(near, near, over)
    assert len(overflowed) == 1 and overflowed[0].message.startswith(
        "blocks.3 has no range headroom left (3 samples in a row under 1, up to step 30, the last one inf/NaN): "
        "keeps overflowing float16: bfloat16")


def test_headroom_alarm_blames_the_named_source_not_the_layers_after_it():
    """numerics-lab in float16: blocks.3's MLP overflows, and ln_f and head only pass its inf on.
    The alarm names blocks.3 (which holds the first non-finite module), not the layers after it."""
    from amptui.core.stream.records import Numerics

    first = describe_nonfinite("blocks.3.mlp.proj", "forward", "float16", 65504.0, 3.8e5)
    layers = [{"name": "blocks.2", "forward": 5.3}, {"name": "blocks.3", "nonfinite": "forward"},
              {"name": "ln_f", "nonfinite": "forward"}, {"name": "head", "nonfinite": "forward"}]
    alarms = HeadroomAlarms("float16")
    said = [a for step in (1, 2, 3) for a in alarms.observe([Numerics(step, "float16", 65504.0, layers,
                                                                      first_nonfinite=first)])]
    low = [a.message for a in said if a.code == "low_headroom"]
    assert len(low) == 1 and low[0].startswith("blocks.3 has no range headroom left"), low
