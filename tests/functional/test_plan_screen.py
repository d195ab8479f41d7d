"""The dashboard's plan screen (issue 44): P on a preset shows its newest `amptui plan` (the run
folder's plan.json): the table, the layers x recipes SQNR heat map, the reasons; without a plan, P
says how to make one."""

from __future__ import annotations

import json

from support.dashboard import Notes, app_for, async_test, home_ready, select_run, settled, until

from amptui.core.stream.events import EventWriter
from amptui.dashboard.screens.help import key_rows
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.plan.screen import PlanScreen
from amptui.dashboard.screens.run.screen import RunScreen


def figures(db: float) -> dict:
    return {"runs": True, "sqnr_db": db, "grad_input_sqnr_db": db + 1, "grad_weight_sqnr_db": db + 2,
            "predicted_speedup": 1.39}


def plan_run(root, run_id: str, preset: str, plan: dict | None) -> None:
    """A finished run of `preset` in the runs folder; with `plan`, an `amptui plan` run (its plan.json)."""
    run = root / run_id
    run.mkdir()
    (run / "config.toml").write_text(f'[run]\nname = "{preset}"\n')
    with EventWriter(run / "events.jsonl") as w:
        w.emit("start", total_steps=24)
        w.emit("end", status="completed", steps=24)
    if plan is not None:
        (run / "plan.json").write_text(json.dumps(plan))


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
        preset = home.preset.name
        await pilot.press("P")  # no plan of it yet: the command to make one
        assert isinstance(app.screen, HomeScreen) and f"amptui plan {preset}" in notes.text()
        plan_run(root, "20261127-200000-x-abcd", preset, plan_doc(preset))
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


@async_test
async def test_p_on_the_run_screen_shows_that_plan_run_s_plan_or_its_presets_newest(root):
    """The run screen's P: an `amptui plan` run shows its own plan; any other run of the preset
    the preset's newest plan; a run of a preset never planned names the command. The help lists P."""
    plan_run(root, "20261127-190000-lab-aaaa", "lab", {**plan_doc("lab"), "predicted_speedup": 1.11})
    plan_run(root, "20261127-200000-lab-bbbb", "lab", plan_doc("lab"))  # the newest plan of lab
    plan_run(root, "20261127-210000-lab-cccc", "lab", None)             # a training run of lab
    plan_run(root, "20261127-210000-solo-dddd", "solo", None)           # never planned
    app = app_for(root)
    async with app.run_test(size=(110, 40)) as pilot:
        await home_ready(pilot)
        notes = Notes().install(app)

        async def plan_from_run(run_id: str) -> None:
            await select_run(pilot, run_id)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.run.preset != "")
            await pilot.press("P")

        await plan_from_run("20261127-190000-lab-aaaa")
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        assert app.screen.doc["predicted_speedup"] == 1.11  # its own plan, not the newer one
        assert "1.11x as fast" in str(app.screen.query_one("#plan-words").render())
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        assert any(key == "P" and what == "Plan" for key, what, _ in key_rows(app.screen))
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))

        await plan_from_run("20261127-210000-lab-cccc")
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        assert app.screen.doc["run_id"] == "20261127-200000-x-abcd" and app.screen.doc["predicted_speedup"] == 1.29
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))

        await plan_from_run("20261127-210000-solo-dddd")
        await until(pilot, lambda: "amptui plan solo" in notes.text())
        assert isinstance(app.screen, RunScreen)


@async_test
async def test_a_plan_file_whose_tables_are_lists_or_strings_is_drawn_not_a_crash(root):
    """plan.json is runs-folder data: a crafted or damaged one (a layer's shape a list, its recipes a
    string, the device a number, a share that is text) shows what it can, never ends the dashboard."""
    layer = {"name": "fc1", "shape": [1, 2], "flops_share": "most", "recipes": "bf16", "choice": "bf16"}
    odd = {"name": "fc2", "recipes": {"bf16": [52], "fp16": "x", "fp8": 3}, "choice": "fp8"}
    doc = {"preset": "p", "device": 7, "risk": ["x"], "samples": 4, "layers": [layer, odd]}
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await home_ready(pilot)
        app.push_screen(PlanScreen(doc))
        await until(pilot, lambda: isinstance(app.screen, PlanScreen))
        await settled(pilot)
        assert app.screen.query_one("#plan-table").row_count == 2
        assert "fc2" in str(app.screen.query_one("#plan-heat").render())
