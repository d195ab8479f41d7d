"""`amptui tune`: real trials through the normal trainer (tiny models, few steps), the accuracy
guard, the out-of-memory path, the tuned preset, Ctrl-C, and the dashboard's tune screen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import amptui
from support.records import events
from support.tune_presets import TINY, tiny_preset
from support.waits import wait_until

from amptui.core.config import presets as presetmod
from amptui.tune import plan as T
from amptui.tune.runner import Search

# A mock of what this machine lacks: a GPU that runs out of memory. The model raises torch's own
# OutOfMemoryError (with CUDA's message) when a batch is larger than `limit`, as a real GPU would.
HUNGRY = """\
import torch
from torch import nn


class Hungry(nn.Module):
    def __init__(self, num_classes, limit):
        super().__init__()
        self.limit = limit
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB (mock: batch "
                                         f"{x.shape[0]} > {self.limit})")
        return self.net(x)


def build(num_classes=10, limit=8):
    return Hungry(num_classes, limit)
"""


# --- real trials ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_guard_rejects_a_diverging_float16_trial(tmp_path, runs_dir):
    """float16 without a GradScaler and with inf injected into the gradients: its loss goes NaN."""
    preset = presetmod.find_preset(str(tiny_preset(tmp_path)))
    search = Search(preset, {}, {"precision"}, 300, runs_dir, T.tune_id("tiny"), "cpu", say=lambda line: None)
    search.trial(T.precision_candidate("fp32"))
    search.trial(T.Candidate("fp16 no scaler", {"amp.autocast": True, "amp.dtype": "float16",
                                                "amp.grad_scaler": False, "debug.inject_inf_every": 3}))
    result = search.finish()
    ref, bad = result["trials"]
    assert ref["status"] == "completed" and ref["verdict"].startswith("WINNER (stay in fp32)")
    assert bad["verdict"].startswith("rejected: non-finite loss"), bad
    assert any("fp16 no scaler was rejected: non-finite loss" in line for line in result["explanation"])
    saved = json.loads(T.result_path(runs_dir, result["tune_id"]).read_text())
    assert saved["status"] == "done" and [t["run_id"] for t in saved["trials"]] == [ref["run_id"], bad["run_id"]]
    for t in saved["trials"]:  # each trial is a real run of its own, named for its tune
        recs = events(runs_dir / t["run_id"])
        assert recs[0]["config"]["run"]["name"].startswith("tiny-tune-") and recs[-1]["kind"] == "end"


@pytest.mark.slow
def test_out_of_memory_trial_is_recorded_and_the_winner_round_trips_as_a_preset(tmp_path, runs_dir):
    (tmp_path / "hungry.py").write_text(HUNGRY)
    preset = tmp_path / "hungry.toml"
    preset.write_text(TINY.replace('name = "smallcnn"\nwidth = 4\n', 'factory = "hungry:build"\nlimit = 8\n'))
    proc = amptui("tune", str(preset), "--keys", "data.batch_size", "--budget", "4", "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    by_name = {t["candidate"]: t for t in result["trials"]}
    oom = by_name["fp32 batch 16"]
    assert oom["status"] == "oom" and oom["verdict"] == "out of memory" and "OutOfMemoryError" in oom["reason"]
    end = events(runs_dir / oom["run_id"])[-1]
    assert end["kind"] == "end" and end["error"]["type"] == "OutOfMemoryError"
    assert result["winner"] == "fp32" and any(line.startswith("Memory-bound: batch 16") for line in result["explanation"])

    tuned = presetmod.find_preset("hungry-tuned")
    assert Path(result["saved_preset"]) == tuned.path and not tuned.builtin
    cfg = tuned.config()
    assert (cfg.model.factory, cfg.model.args, cfg.data.batch_size, cfg.amp.autocast) == ("hungry:build", {"limit": 8},
                                                                                          8, False)
    assert cfg.run.max_steps == 0 and cfg.log.every == 10  # the trials' short settings are not the preset's
    assert cfg.run.name == "hungry-tuned" and "tuned by amptui tune" in tuned.description
    shown = amptui("presets", "show", "hungry-tuned", check=True).stdout
    assert 'factory = "hungry:build"' in shown


@pytest.mark.slow
def test_ctrl_c_stops_the_search_and_the_running_trial_and_still_reports(tmp_path, runs_dir):
    preset = tiny_preset(tmp_path).resolve()
    # a larger model, so the second trial is surely still running when Ctrl-C comes
    proc = subprocess.Popen([sys.executable, "-m", "amptui", "tune", str(preset), "--budget", "5",
                             "--set", "data.train_samples=4096", "--set", "model.width=32", "--set", "data.img_size=32"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def second_trial_running() -> Path | None:
        found = list(runs_dir.glob("*.tune.json")) if runs_dir.exists() else []
        trials = json.loads(found[0].read_text())["trials"] if found else []
        return found[0] if len(trials) >= 2 and trials[-1]["status"] == "running" and \
            (runs_dir / trials[-1]["run_id"] / "events.jsonl").exists() else None

    try:
        result_file = wait_until(second_trial_running, 240, "the second trial running", step=0.3)
    except AssertionError:
        proc.kill()
        raise
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    result = json.loads(result_file.read_text())
    assert result["status"] == "interrupted"
    fp32, second = result["trials"][0], result["trials"][1]
    assert fp32["ms_per_step"] is not None and second["status"] == "stopped" and second["reason"] == "interrupted"
    assert "fp32" in out and "interrupted after 2 trial(s)" in out and "saved the winner" not in out
    assert "stopping…" in out and "WINNER" not in out and "Not enough trials to recommend" in out
    assert result["winner"] is None and result["partial"].startswith("not enough trials to recommend: the search was "
                                                                     "stopped before it measured")
    assert "Measured: fp32 " in out and "nothing to compare" not in out
    end = events(runs_dir / second["run_id"])[-1]
    assert end["kind"] == "end" and end["status"] == "stopped"  # the trial was stopped, not left running
    assert not presetmod.saved_dir().joinpath("tiny-tuned.toml").exists()


@pytest.mark.slow
def test_dashboard_t_tunes_in_the_background_and_q_stops_it_with_no_winner(tmp_path, runs_dir):
    """The real search behind the canned ones above: q stops it at once; a stopped search names no
    winner and s saves nothing (issue 25)."""
    from support.dashboard import Notes, async_test, until
    from textual.widgets import DataTable, OptionList

    from amptui.core.config import values as cfgmod
    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.home.screen import HomeScreen
    from amptui.dashboard.screens.tune.screen import TuneScreen
    from amptui.dashboard.screens.tune.start import TuneStartModal

    tiny = tiny_preset(tmp_path)
    presetmod.save_preset("tiny", cfgmod.build_config(cfgmod.read_toml(tiny)))

    @async_test
    async def drive():
        app = make_app(runs_dir)
        notes = Notes().install(app)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.presets)
            home = app.screen
            options = home.query_one("#presets", OptionList)
            options.highlighted = [p.name for p in home.presets].index("tiny")
            await until(pilot, lambda: home.preset is not None and home.preset.name == "tiny")
            await pilot.press("t")  # asks the budget first (tune --budget)
            await until(pilot, lambda: isinstance(app.screen, TuneStartModal))
            app.screen.query_one("#tune-budget").value = "6"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, TuneScreen))
            screen = app.screen

            def third_trial_running():  # fp32 and bf16 measured, the third trial under way
                trials = (screen.result or {}).get("trials", [])
                return len(trials) >= 3 and trials[-1]["status"] == "running" and \
                    (runs_dir / trials[-1]["run_id"] / "events.jsonl").exists()

            await until(pilot, third_trial_running, timeout=300, step=0.5)
            assert screen.result["budget_s"] == 360
            assert screen.query_one("#tune-table", DataTable).row_count == 3
            await pilot.press("q")  # stops the search, stays on the screen, says so at once
            await until(pilot, lambda: "stopping…" in str(screen.query_one("#tune-title").render()), timeout=5)
            await until(pilot, lambda: screen.result.get("status") == "interrupted", timeout=120, step=0.5)
            assert app.screen is screen
            assert screen.result["winner"] is None and screen.result["partial"].startswith("not enough trials")
            assert "stopped: partial result, no winner" in str(screen.query_one("#tune-title").render())
            assert all("WINNER" not in (t.get("verdict") or "") for t in screen.result["trials"])
            await pilot.press("s")
            await until(pilot, lambda: "no winner to save" in notes.text())
            await pilot.press("q")  # the search has ended: back home
            await until(pilot, lambda: isinstance(app.screen, HomeScreen))
            assert "tiny-tuned" not in [p.name for p in app.screen.presets]

    try:
        drive()
    finally:  # a failed test must not leave its background tune running
        for result in runs_dir.glob("*.tune.json"):
            if json.loads(result.read_text())["status"] == "running":
                try:
                    os.kill(json.loads(result.read_text())["pid"], signal.SIGINT)
                except OSError:
                    pass
    assert not presetmod.saved_dir().joinpath("tiny-tuned.toml").exists()
