"""The run screen's float8 view: a run whose numerics records carry float8 linears (amp.float8)
shows, in the heat map's panel (key 7), each converted linear's SQNR over the sampled steps, low
SQNR hot as low headroom is, with the layers that lost the most named under it. No torchao needed:
the canned run is written with the record classes."""

from __future__ import annotations

import json
import math

from support.dashboard import app_for, async_test, until
from support.pictures import FLOAT8_LAYERS, float8_sqnr, write_float8_run

from amptui.core.modes.float8 import MODE
from amptui.core.numerics import NumericsSummary, summarize
from amptui.dashboard.widgets.heatmap import band, probe_bands, probe_map

SQNR_BANDS = probe_bands(MODE.probe)


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
    assert s.probes["float8"].rows == {"fc": [26.5, 7.5, -math.inf, None, None]}  # a sample without it: not measured
    assert s.probes["float8"].lowest() == [("fc", -math.inf)]
    assert [band(v, SQNR_BANDS)[1] for v in s.probes["float8"].rows["fc"]] == ["green", "red", "bold red", "grey42", "grey42"]
    assert band(-math.inf, SQNR_BANDS)[0] == "✖"


def test_the_float8_rows_keep_the_heat_maps_cap_and_a_layer_first_seen_late_lines_up():
    s = NumericsSummary(cap=3)
    for step in range(1, 6):
        layers = [{"name": "a", "sqnr_db": 20.0 + step}] + ([{"name": "b", "sqnr_db": 12.0}] if step >= 4 else [])
        s.add(_sample(step, layers))
    assert s.steps == [3, 4, 5]
    assert s.probes["float8"].rows == {"a": [23.0, 24.0, 25.0], "b": [None, 12.0, 12.0]}


def test_with_more_float8_layers_than_rows_the_lowest_are_drawn_in_model_order():
    s = summarize([_sample(step, [{"name": name, "sqnr_db": float8_sqnr(name, step)} for name in FLOAT8_LAYERS])
                   for step in range(4, 121, 4)])
    drawn = probe_map(s.probed(), 60, 2)
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
        assert view.probed is not None and view.probed.probe.key == "float8"
        await until(pilot, lambda: not view.render().plain.startswith("no "))  # its rows, once the samples are in
        drawn = view.render().plain.splitlines()
        # every converted linear, in model order; in the panel's narrow labels without the "blocks."
        # all of them share, so a cut name keeps its block's number
        assert [line.split()[0] for line in drawn] == [name.removeprefix("blocks.") for name in FLOAT8_LAYERS]
        info = str(panel.query_one("#numerics-info").render())
        assert "float8 rowwise: 7 linears" in info
        assert "lowest: blocks.1.mlp.proj 8.0 dB, blocks.0.mlp.fc 16.5 dB" in info


OLD_LINE = ('{"v": 1, "kind": "numerics", "t": 1700000000.0, "rank": 0, "step": 8, "dtype": "bfloat16", '
            '"max_finite": 3.3895e38, "layers": [{"name": "blocks.0", "forward": 110.0, "grad": 100.0, "underflow": 0.0}], '
            '"float8": [{"name": "blocks.0.mlp.fc", "recipe": "tensorwise", "sqnr_db": 7.5, '
            '"input": {"format": "e4m3", "amax": 6.0, "scale": 74.67, "underflow": 0.001}, '
            '"weight": {"format": "e4m3", "amax": 0.2, "scale": 2240.0, "underflow": 0.0}, '
            '"grad_output": {"format": "e5m2", "amax": 0.001, "scale": 5.7e7, "underflow": 0.004}}]}\n')


def test_a_numerics_line_recorded_before_probes_reads_and_shows_as_it_did(tmp_path):
    """A run recorded before modes owned their probes wrote float8's entries as the record's `float8`
    field: read from its events file, the heat map's view, `amptui numerics`, the alarm and the sinks'
    figure are what they were, and a record written now has the same line."""
    from amptui.cli.numerics import as_json, as_table
    from amptui.core.stream.events import read_events
    from amptui.core.stream.records import Numerics
    from amptui.telemetry.alarms import HeadroomAlarms
    from amptui.telemetry.sinks import numerics_summary

    path = tmp_path / "events.jsonl"
    path.write_text(OLD_LINE)
    records = list(read_events(path))
    s = summarize(records)
    assert s.probes["float8"].rows == {"blocks.0.mlp.fc": [7.5]} and s.probed() is s.probes["float8"]
    assert s.probes["float8"].latest["blocks.0.mlp.fc"]["lowest_sqnr_db"] == 7.5
    assert as_json("r", s)["float8"][0]["recipe"] == "tensorwise"
    table = as_table("r", s)
    assert "float8 (tensorwise), latest sample:" in table and "blocks.0.mlp.fc" in table and "7.5" in table
    assert probe_map(s.probed(), 60, 2).plain.startswith("blocks.0.mlp.fc ")
    alarms = HeadroomAlarms("bfloat16").observe(records)
    assert [a.code for a in alarms] == ["float8_sqnr"] and "7.5 dB" in alarms[0].message
    assert numerics_summary(records[0])["min_float8_sqnr_db"] == 7.5
    # written now: the probe's entries are the line's `float8` field, as before
    again = Numerics(step=8, dtype="bfloat16", max_finite=3.3895e38, layers=records[0].layers,
                     probes={"float8": records[0].get("float8")})
    assert json.loads(OLD_LINE)["float8"] == again.fields()["float8"] and "probes" not in again.fields()


def test_a_damaged_float8_entry_reads_as_unknown_in_the_table_and_alarms(tmp_path):
    """A runs folder is data: a numerics line whose float8 entry holds a string or a number where a
    tensor's {format, amax, scale, underflow} belongs shows "-" there in `amptui numerics` (and
    raises no alarm on it), instead of ending in a traceback."""
    from amptui.cli.numerics import as_json, as_table
    from amptui.core.stream.events import read_events
    from amptui.telemetry.alarms import HeadroomAlarms

    line = json.loads(OLD_LINE)
    entry = line["float8"][0]
    entry["input"], entry["weight"], entry["sqnr_db"] = "damaged", 5, 25.0
    (tmp_path / "events.jsonl").write_text(json.dumps(line) + "\n")
    records = list(read_events(tmp_path / "events.jsonl"))
    s = summarize(records)
    row = next(x for x in as_table("r", s).splitlines() if x.startswith("blocks.0.mlp.fc"))
    assert row.split()[1:] == ["25.0", "25.0", "-", "-", "-/-/0.4"]
    assert as_json("r", s)["float8"][0]["input"] == "damaged"
    assert HeadroomAlarms("bfloat16").observe(records) == []
