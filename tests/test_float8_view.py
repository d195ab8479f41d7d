"""The run screen's float8 view: a run whose numerics records carry float8 linears (amp.float8)
shows, in the heat map's panel (key 7), each converted linear's SQNR over the sampled steps, low
SQNR hot as low headroom is, with the layers that lost the most named under it. No torchao needed:
the canned run is written with the record classes."""

from __future__ import annotations

import math

from support.dashboard import app_for, async_test, until
from support.pictures import FLOAT8_LAYERS, float8_sqnr, write_float8_run

from amptui.core.numerics import NumericsSummary, summarize
from amptui.dashboard.widgets.heatmap import SQNR_BANDS, band, sqnr_map


def _sample(step: int, float8: list[dict]) -> dict:
    return {"kind": "numerics", "step": step, "dtype": "bfloat16", "max_finite": 3.4e38,
            "layers": [{"name": "blocks.0", "forward": 100.0, "grad": 100.0}], "float8": float8}


def test_the_summary_keeps_each_float8_layers_sqnr_per_sample_and_marks_inf_nan():
    healthy = {"name": "fc", "recipe": "tensorwise", "sqnr_db": 26.5}
    broken = {"name": "fc", "recipe": "tensorwise", "sqnr_db": None,
              "input": {"format": "e4m3", "amax": 3.0}, "grad_output": {"format": "e5m2", "amax": None}}
    unseen = {"name": "fc", "recipe": "tensorwise", "sqnr_db": None, "input": {"format": "e4m3", "amax": 0.0}}
    s = summarize([_sample(10, [healthy]), _sample(20, [{**healthy, "sqnr_db": 7.5}]), _sample(30, [broken]),
                   _sample(40, [unseen]), _sample(50, [])])
    assert s.steps == [10, 20, 30, 40, 50]
    assert s.float8_rows == {"fc": [26.5, 7.5, -math.inf, None, None]}  # a sample without it: not measured
    assert s.lowest_float8() == [("fc", -math.inf)]
    assert [band(v, SQNR_BANDS)[1] for v in s.float8_rows["fc"]] == ["green", "red", "bold red", "grey42", "grey42"]
    assert band(-math.inf, SQNR_BANDS)[0] == "✖"


def test_the_float8_rows_keep_the_heat_maps_cap_and_a_layer_first_seen_late_lines_up():
    s = NumericsSummary(cap=3)
    for step in range(1, 6):
        layers = [{"name": "a", "sqnr_db": 20.0 + step}] + ([{"name": "b", "sqnr_db": 12.0}] if step >= 4 else [])
        s.add(_sample(step, layers))
    assert s.steps == [3, 4, 5]
    assert s.float8_rows == {"a": [23.0, 24.0, 25.0], "b": [None, 12.0, 12.0]}


def test_with_more_float8_layers_than_rows_the_lowest_are_drawn_in_model_order():
    s = summarize([_sample(step, [{"name": name, "sqnr_db": float8_sqnr(name, step)} for name in FLOAT8_LAYERS])
                   for step in range(4, 121, 4)])
    drawn = sqnr_map(s, 60, 2)
    names = [line.split()[0] for line in drawn.plain.splitlines()]
    assert names == ["blocks.0.mlp.fc", "blocks.1.mlp.proj"]
    last = drawn.split("\n")[1]  # blocks.1.mlp.proj: under the alarm's 10 dB on its latest samples
    assert last.spans[-1].style == "red" and last.plain.endswith("█")


@async_test
async def test_a_float8_run_shows_its_sqnr_per_layer_in_the_heat_maps_panel(root):
    from amptui.dashboard.screens.run.screen import RunScreen
    from amptui.dashboard.widgets.heatmap import HeatMapView

    run = write_float8_run(root)
    app = app_for(root, watch=run)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and not app.screen.model.loading
                    and app.screen.drawn())
        panel = app.screen.query_one("#p-numerics")
        await until(pilot, lambda: "float8 SQNR" in str(panel.border_title))
        assert panel.display and str(panel.border_subtitle) == "lowest 8.0 dB"
        view = panel.query_one(HeatMapView)
        assert view.float8
        await until(pilot, lambda: not view.render().plain.startswith("no "))  # its rows, once the samples are in
        drawn = view.render().plain.splitlines()
        # every converted linear, in model order; in the panel's narrow labels without the "blocks."
        # all of them share, so a cut name keeps its block's number
        assert [line.split()[0] for line in drawn] == [name.removeprefix("blocks.") for name in FLOAT8_LAYERS]
        info = str(panel.query_one("#numerics-info").render())
        assert "float8 rowwise: 7 linears" in info
        assert "lowest: blocks.1.mlp.proj 8.0 dB, blocks.0.mlp.fc 16.5 dB" in info
