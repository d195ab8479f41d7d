"""The dashboard's plan screen (issue 44): P on a preset shows its newest `amptui plan` (the run
folder's plan.json): the table, the layers x recipes SQNR heat map, the reasons; without a plan, P
says how to make one."""

from __future__ import annotations

import json

from support.dashboard import Notes, app_for, async_test, home_ready, until

from amptui.core.events import EventWriter
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.plan.screen import PlanScreen


def figures(db: float) -> dict:
    return {"runs": True, "sqnr_db": db, "grad_input_sqnr_db": db + 1, "grad_weight_sqnr_db": db + 2,
            "predicted_speedup": 1.39}


def plan_doc(preset: str) -> dict:
    def layer(name: str, fp8: float, choice: str) -> dict:
        return {"name": name, "shape": {"m": 2048, "k": 2048, "n": 2048}, "flops_share": 0.5,
                "recipes": {"bf16": {"sqnr_db": 52.0}, "fp16": {"headroom_forward": 3.0, "headroom_grad": 9.0},
                            "fp8": figures(fp8), "fp8-rowwise": figures(fp8 + 1), "mxfp8": figures(27.0)},
                "choice": choice, "reason": f"{choice}: because"}
    return {"run_id": "20261127-200000-x-abcd", "preset": preset, "device": {"name": "H100 SXM"}, "samples": 4,
            "layers": [layer("hidden.0", 28.5, "fp8-rowwise"), layer("outlier", 7.8, "bf16")],
            "predicted_speedup": 1.29, "risk": {"lowest_sqnr_db": 28.1, "layer": "hidden.0"}, "float8_layers": 1}


@async_test
async def test_p_on_a_preset_shows_its_newest_plan_and_says_how_to_make_one_when_there_is_none(root):
    app = app_for(root)
    async with app.run_test(size=(110, 40)) as pilot:
        home = await home_ready(pilot)
        notes = Notes().install(app)
        preset = home.preset_picker.preset.name
        await pilot.press("P")  # no plan of it yet: the command to make one
        assert isinstance(app.screen, HomeScreen) and f"amptui plan {preset}" in notes.text()
        run = root / "20261127-200000-x-abcd"
        run.mkdir()
        (run / "config.toml").write_text(f'[run]\nname = "{preset}"\n')
        with EventWriter(run / "events.jsonl") as w:
            w.emit("start", total_steps=24)
            w.emit("end", status="completed", steps=24)
        (run / "plan.json").write_text(json.dumps(plan_doc(preset)))
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        table = app.screen.query_one("#plan-table")
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows[1][0] == "outlier" and rows[1][-1] == "bf16" and rows[1][5] == "8" and rows[0][-1] == "fp8-rowwise"
        heat = str(app.screen.query_one("#plan-heat").render())
        assert "outlier" in heat and "SQNR" in heat
        assert "risk: lowest kept SQNR 28.1 dB" in str(app.screen.query_one("#plan-words").render())
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
