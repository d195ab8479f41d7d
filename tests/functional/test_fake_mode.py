"""A new precision mode is one file: its `PrecisionMode` (core, no torch) and its trainer-side
`ModeRuntime`, registered by the mode's name. This file is that file for a made-up mode, "fp16
with float32 norms" (autocast float16 plus a conversion that keeps every LayerNorm's weight in
float32 and counts them), and shows the rest of amptui offering it with no other change: the
variant names `ab` takes and lists, the tune plan, the trainer (its conversion, its after-step
hook, its start note and record), preflight (its refusals and warnings), the dashboard's precision
toggle, the layer variants of [amp.layers], the docs' recipe, and its own numerics probe (sampled by
the range sampler, read by the heat map, the alarms, `amptui numerics` and the sinks)."""

from __future__ import annotations

import re

import pytest
import torch
from support.dashboard import async_test, until
from support.fake_mode import NormsFp32, NormsKept, NormsRuntime
from support.paths import REPO

from amptui.core import modes
from amptui.core.config import values as config
from amptui.core.config.precision import Precision
from amptui.trainer import modes as runtime


@pytest.fixture
def registered(monkeypatch):
    """What a mode's module in amptui/core/modes/ and its runtime's in amptui/trainer/modes/ do when
    their packages find them: MODES gets the mode, RUNTIMES its runtime."""
    monkeypatch.setattr(modes, "MODES", [*modes.MODES, NormsFp32()])
    monkeypatch.setitem(runtime.RUNTIMES, "fp16-norms", NormsRuntime())
    runtime.register("fp16-norms")(NormsRuntime)  # the decorator form a mode's file uses
    yield
    runtime.RUNTIMES.pop("fp16-norms", None)


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


def test_the_docs_recipe_names_every_hook_a_mode_and_its_runtime_have():
    """docs/development.md's "Adding a precision mode" names what this file had to write."""
    text = (REPO / "docs/development.md").read_text()
    section = text.split("## Adding a precision mode", 1)[1].split("\n## ", 1)[0]
    hooks = [n for n in vars(modes.PrecisionMode) if not n.startswith("_") and callable(getattr(modes.PrecisionMode, n))]
    hooks += [n for n in vars(runtime.ModeRuntime) if not n.startswith("_") and callable(getattr(runtime.ModeRuntime, n))]
    missing = [n for n in hooks if not re.search(rf"`{n}`", section)]
    assert not missing, missing
    assert "tests/unit/test_fake_mode.py" in section and "module:function" not in section
