"""A new precision mode is one file: its `PrecisionMode` (core, no torch) and its trainer-side
`ModeRuntime`, registered by the mode's name. This file is that file for a made-up mode, "fp16
with float32 norms" (autocast float16 plus a conversion that keeps every LayerNorm's weight in
float32 and counts them), and shows the rest of amptui offering it with no other change: the
variant names `ab` takes and lists, the tune plan, the trainer (its conversion, its after-step
hook, its start note and record), preflight (its refusals and warnings), the dashboard's precision
toggle, the layer variants of [amp.layers], the docs' recipe, and its own numerics probe (sampled by
the range sampler, read by the heat map, the alarms, `amptui numerics` and the sinks)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from support.fake_mode import Kept, NormsFp32, NormsRuntime
from torch import nn

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision, layer_variants, listing
from amptui.trainer import modes as runtime
from amptui.tune import plan as tune_plan  # imported before a test adds the mode: its PRECISIONS stay amptui's


@pytest.fixture
def registered(monkeypatch):
    """What a mode's module in amptui/core/modes/ and its runtime's in amptui/trainer/modes/ do when
    their packages find them: MODES gets the mode, RUNTIMES its runtime."""
    monkeypatch.setattr(modes, "MODES", [*modes.MODES, NormsFp32()])
    monkeypatch.setitem(runtime.RUNTIMES, "fp16-norms", NormsRuntime())
    runtime.register("fp16-norms")(NormsRuntime)  # the decorator form a mode's file uses
    yield
    runtime.RUNTIMES.pop("fp16-norms", None)


# --- offered everywhere ---------------------------------------------------------------------------

def test_ab_takes_and_lists_the_new_variant(registered):
    assert "fp16-norms" in ab.known_variants()
    assert ("fp16-norms", "autocast float16, norms in float32 + GradScaler") in listing()
    assert dict(ab.expand("fp32,fp16-norms", "cuda"))["fp16-norms"] == {
        "amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True, "amp.mode": "fp16-norms"}
    p = Precision.from_variant("fp16-norms")
    assert isinstance(p.mode, NormsFp32) and p.short == "fp16-norms+scaler"
    assert p != Precision.from_variant("fp16+scaler") and Precision.from_record(p.as_record()) == p
    assert p.as_record()["norms"] == {"dtype": "float32"} and p.as_record()["mode"] == "fp16-norms"
    # its own name picks it: the same shared fields with another option are another precision
    assert dataclasses.replace(p, options=Kept("bfloat16")) != p


def test_tune_plans_it_after_the_built_in_precisions(registered):
    T = tune_plan
    assert T.precisions() == ("bf16", "fp16+scaler", "bf16-pure", "fp16-norms")
    assert T.precision_candidate("fp16-norms").knobs["amp.mode"] == "fp16-norms"
    from amptui.tune.scriptsearch import script_precisions

    # tune --script asks the modes too, and keeps what amptui can apply to a script's loop (run.apply_amp)
    assert script_precisions() == ("bf16", "fp16+scaler", "bf16+scaler", "fp16")


def test_preflight_asks_the_mode_for_its_refusals_and_warnings(registered):
    """The launch's checks are the mode's: its refusal stops a launch, its warnings (its own, and the
    shared dtype rules it inherits) are the run's odd-combination warnings."""
    from amptui.core.errors import UserError
    from amptui.core.prepare import preflight

    cfg = config.build_config({"run": {"device": "cpu"}}, Precision.from_variant("fp16-norms").overrides())
    notes = preflight.odd_combinations(cfg)
    assert "fp16-norms on the CPU: the float32 norms cast every step" in notes
    assert any(n.startswith("float16 autocast on the CPU: ") for n in notes)
    preflight.check_precision(cfg)
    with pytest.raises(UserError, match="fp16-norms keeps each replica's norms in float32 itself"):
        preflight.check_precision(cfg.with_overrides({"dist.mode": "dp"}))


def test_a_layer_can_take_it_when_it_is_a_compute_precision_of_its_own(registered):
    assert "fp16-norms" not in layer_variants()  # it needs a GradScaler: the run's, not a layer's


# --- ... and, optionally, its numerics probe --------------------------------------------------------

class NormsMargin(modes.NumericsProbe):
    """The fake mode's probe: per norm, the margin (dB) of its float32 weight over float16's smallest normal."""

    key = "fp16-norms"
    figure = "margin_db"
    title = "norms' margin (dB)"
    unit = "dB over float16's smallest normal"
    bands = ((0.0, "inf/NaN"), (3.0, "<3"), (6.0, "<6"), (12.0, "<12"), (float("inf"), "12+"))
    alarm_code = "norms_margin"

    def alarm(self, entry, step):
        margin = entry.get("margin_db")
        return f"{entry['name']}'s margin is {margin:.1f} dB at step {step}" if isinstance(margin, float) and margin < 3 else None


class NormsRows:
    """Its runtime half (a module of amptui/telemetry/probes/): one buffer row, the first norm's weight's abs min."""

    KEY = "fp16-norms"

    def __init__(self, model=None):
        self.norm = model
        self.rows, self.key = 1, self.KEY

    def attach(self, model):
        norm = next((m for m in model.modules() if isinstance(m, nn.LayerNorm)), None)
        return NormsRows(norm) if norm is not None else None

    def seen(self, model):
        return None

    def hook(self, buffer, first_row, quiet):
        def write(module, inputs, output):
            buffer[first_row, 0] = module.weight.detach().abs().min().float()
        return [self.norm.register_forward_hook(write)]

    def records(self, values):
        return [{"name": "ln", "margin_db": round(20 * math.log10(values[0] / 6.1e-5), 2)}]


def test_its_numerics_probe_is_sampled_and_read_by_the_heat_map_alarms_cli_and_sinks(registered, monkeypatch):
    """A mode's probe takes no edit elsewhere: the range sampler hooks its runtime half and writes its entries
    under its key; the heat map's view, the alarms, `amptui numerics` and the sinks' figures read them."""
    from amptui.cli.numerics import as_json, as_table
    from amptui.core.numerics import summarize
    from amptui.dashboard.widgets.heatmap import probe_legend, probe_map
    from amptui.telemetry import probes
    from amptui.telemetry.alarms import HeadroomAlarms
    from amptui.telemetry.numerics import RangeSampler
    from amptui.telemetry.sinks import numerics_summary

    monkeypatch.setattr(modes.MODES[-1], "probe", NormsMargin())
    monkeypatch.setattr(probes, "MODULES", [*probes.MODULES, NormsRows()])
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    with torch.no_grad():
        model[1].weight.fill_(1e-4)  # 4.29 dB over float16's smallest normal: low, not yet under the alarm's 3 dB
    sampler = RangeSampler(model, every=1, depth=1, dtype="float16", device=torch.device("cpu"))
    sampler.prepare(1, None)
    model(torch.randn(2, 4)).sum().backward()
    sampler.step_done()
    [record] = sampler.records([b.flatten().tolist() for b in sampler.riders()])
    assert record.get("fp16-norms") == [{"name": "ln", "margin_db": 4.29}]
    line = {"kind": "numerics", **record.fields()}
    low = {**line, "step": 2, "fp16-norms": [{"name": "ln", "margin_db": 1.5}]}
    s = summarize([line, low])
    series = s.probed()
    assert series is not None and series.probe.key == "fp16-norms" and series.rows == {"ln": [4.29, 1.5]}
    assert probe_map(series, 40, 2).plain.startswith("ln ") and "lowest: ln 1.5" in probe_legend(s, series).plain
    assert "fp16-norms, latest sample:" in as_table("r", s) and as_json("r", s)["fp16-norms"][0]["lowest_margin_db"] == 1.5
    alarms = HeadroomAlarms("float16").observe([dataclasses.replace(record, step=2, probes={"fp16-norms": low["fp16-norms"]})])
    assert [(a.code, a.message) for a in alarms] == [("norms_margin", "ln's margin is 1.5 dB at step 2")]
    assert numerics_summary(record)["min_fp16-norms_margin_db"] == 4.29
