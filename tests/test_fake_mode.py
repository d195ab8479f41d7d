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
import re
from dataclasses import dataclass

import pytest
import torch
from support.dashboard import async_test, until
from support.paths import REPO
from torch import nn

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision, layer_variants, listing
from amptui.trainer import modes as runtime
from amptui.tune import plan as tune_plan  # imported before a test adds the mode: its PRECISIONS stay amptui's

# --- the one file a new mode takes: its mode ... -------------------------------------------------

@dataclass(frozen=True)
class Kept:
    """The mode's own options value: the dtype its norms are kept in."""

    dtype: str = "float32"


class NormsFp32(modes.PrecisionMode):
    """float16 autocast with a GradScaler, the norms kept in float32: a mode of its own name
    (amp.mode = "fp16-norms") with its own options, no field of another mode's borrowed."""

    name = "fp16-norms"
    chosen_by_name = True

    def variants(self):
        return ["fp16-norms"]

    def tune_variants(self):
        return ["fp16-norms"]

    def parse(self, variant, base):
        return self.own(base.with_shared(autocast=True, dtype="float16", scaler=True), Kept()) \
            if variant == "fp16-norms" else None

    def configure(self, cfg, base):
        return self.own(base, Kept())

    def read(self, record, base):
        return self.own(base, Kept(record["norms"]["dtype"])) if "norms" in record else None

    def autocast_dtype(self, p):
        return p.dtype

    def short(self, p):
        return "fp16-norms"

    def words(self, p):
        return f"autocast float16, norms in {p.options.dtype}"

    def record(self, p):
        return {"norms": {"dtype": p.options.dtype}}

    def refusal(self, p, run, asked=None):
        if run.dist == "dp":
            return "fp16-norms keeps each replica's norms in float32 itself: not under DataParallel (use dist.mode=ddp)"
        return None

    def warnings(self, p, run):
        said = [modes.Note("norms_cpu", "fp16-norms on the CPU: the float32 norms cast every step")] \
            if run.device == "cpu" else []
        return [*super().warnings(p, run), *said]  # and the dtype rules every float16 mode shares


# --- ... and its runtime ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NormsKept(runtime.Conversion):
    norms: list[str]

    def record(self):
        return {"kept": list(self.norms)}

    def note(self, device):
        return f"{len(self.norms)} norms kept in float32"


class NormsRuntime(runtime.ModeRuntime):
    record_key = "norms"
    steps = 0

    def convert(self, model, precision, cfg, device, scope):
        norms = [name for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)]
        for name in norms:
            model.get_submodule(name).float()
        return NormsKept(norms)

    def after_optimizer_step(self, model, done):
        NormsRuntime.steps += 1


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


def test_the_trainer_runs_its_runtime(registered):
    """build_state picks the runtime by the mode's name, converts with it; the loop's hooks call it."""
    from amptui.trainer.state import build_state

    class Dist:
        rank, local_rank, world_size, enabled = 0, 0, 1, False

    cfg = config.build_config({"model": {"name": "gpt", "n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 16},
                               "data": {"name": "text", "batch_size": 2, "train_samples": 8, "val_samples": 0},
                               "run": {"device": "cpu"}}, Precision.from_variant("fp16-norms").overrides())
    state = build_state(cfg, Dist(), torch.device("cpu"), lambda line: None)  # type: ignore[arg-type]
    [(used, done)] = state.conversions
    assert isinstance(used, NormsRuntime) and isinstance(done, NormsKept)
    assert done.norms == ["blocks.0.ln_1", "blocks.0.ln_2", "ln_f"] and done.note(state.device) == "3 norms kept in float32"
    assert state.model.get_submodule("ln_f").weight.dtype == torch.float32
    assert state.precision.mode.name == "fp16-norms" and state.autocast.dtype == torch.float16


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


@async_test
async def test_the_dashboard_toggles_offer_it(registered, tmp_path):
    """The home screen's precision select lists every mode's variants, this one too: picking it sets
    the precision rows and keeps the key no row shows (amp.mode); editing a row moves the select to
    the variant the rows form (amp.mode, the key no row shows, kept while the rows make it)."""
    from textual.widgets import OptionList, Select

    from amptui.dashboard.app import make_app
    from amptui.dashboard.widgets.toggles import TogglesPanel

    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: bool(app.screen.query(TogglesPanel)))
        toggles = app.screen.query_one(TogglesPanel)
        select = toggles.query_one("#t-precision", Select)
        summary = toggles.query_one("#toggle-summary")
        select.focus()
        await pilot.press("enter")  # the drop-down, as a user opens it
        overlay = select.query_one(OptionList)  # its drop-down's list
        await until(pilot, lambda: overlay.option_count > 0)
        offered = [str(overlay.get_option_at_index(i).prompt) for i in range(overlay.option_count)]
        assert offered[-2:] == ["fp16-norms", "other"] and "fp8-rowwise" in offered and "bf16+reduce" not in offered
        await pilot.press(*["down"] * (offered.index("fp16-norms") - offered.index(str(select.value))), "enter")
        await until(pilot, lambda: "autocast float16, norms in float32 + GradScaler" in str(summary.render()))
        assert (toggles.query_one("#t-amp-autocast").value, toggles.query_one("#t-amp-dtype").value,
                toggles.query_one("#t-amp-grad-scaler").value) == (True, "float16", True)
        assert toggles.overrides()["amp.mode"] == "fp16-norms"
        assert Precision.from_config(toggles.values(), "cpu") == Precision.from_variant("fp16-norms")
        toggles.query_one("#t-amp-dtype", Select).value = "bfloat16"
        await until(pilot, lambda: select.value == "bf16+scaler")
        assert "amp.mode" not in toggles.overrides() and "autocast bfloat16 + GradScaler" in str(summary.render())
        toggles.query_one("#t-dist-mode", Select).value = "fsdp"  # an FSDP policy: no offered variant is it
        await until(pilot, lambda: select.value == "other")


def test_a_layer_can_take_it_when_it_is_a_compute_precision_of_its_own(registered):
    assert "fp16-norms" not in layer_variants()  # it needs a GradScaler: the run's, not a layer's


def test_the_docs_recipe_names_every_hook_a_mode_and_its_runtime_have():
    """docs/development.md's "Adding a precision mode" names what this file had to write."""
    text = (REPO / "docs/development.md").read_text()
    section = text.split("## Adding a precision mode", 1)[1].split("\n## ", 1)[0]
    hooks = [n for n in vars(modes.PrecisionMode) if not n.startswith("_") and callable(getattr(modes.PrecisionMode, n))]
    hooks += [n for n in vars(runtime.ModeRuntime) if not n.startswith("_") and callable(getattr(runtime.ModeRuntime, n))]
    missing = [n for n in hooks if not re.search(rf"`{n}`", section)]
    assert not missing, missing
    assert "tests/test_fake_mode.py" in section and "module:function" not in section


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
