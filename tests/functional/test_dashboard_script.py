"""The home screen's `e`: run a script of your own by path with its arguments (pilot, canned runs)."""

from __future__ import annotations

import json
import subprocess

from support.dashboard import LIVE, app_for, async_test, copy_runs, home_ready, until
from textual.widgets import Input, Static

from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.screens.script_modal import ScriptModal
from amptui.jobs.spawn import amptui_python


@async_test
async def test_e_runs_a_script_by_path_with_its_arguments(root, monkeypatch, tmp_path):
    seen = {}

    def fake_run(command, **kwargs):
        seen["command"] = command
        copy_runs(root, live=True)
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps({"kind": "run", "run_id": LIVE}) + "\n",
                                           stderr="")

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_run)
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ScriptModal))
        field = app.screen.query_one("#script", Input)
        field.value = "no_such_train.py --lr 1"
        await pilot.press("enter")
        assert "no_such_train.py: no such file" in str(app.screen.query_one("#script-msg", Static).render())
        assert "command" not in seen
        field.value = f"{script} --lr 1e-3 --name 'two words'"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
    command = seen["command"]
    assert command[:5] == [*amptui_python(), "-m", "amptui", "run"]
    assert command[5:8] == ["--script", str(script), "--detach"] and str(root) in command
    assert command[command.index("--") + 1:] == ["--lr", "1e-3", "--name", "two words"]
