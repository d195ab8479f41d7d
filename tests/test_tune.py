"""`amptui tune`: real trials through the normal trainer (tiny models, few steps), the accuracy
guard, the out-of-memory path, the tuned preset, Ctrl-C, and the dashboard's tune screen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import amptui, events

from amptui.core.config import presets as presetmod
from amptui.tune import plan as T
from amptui.tune import verdict as V
from amptui.tune.runner import Search

TINY = """\
[run]
description = "tiny CNN for tune tests"
device = "cpu"
[model]
name = "smallcnn"
width = 4
[data]
name = "synthetic"
img_size = 8
batch_size = 8
train_samples = 256
val_samples = 0
[amp]
autocast = false
"""

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


def tiny_preset(tmp_path: Path, extra: str = "", name: str = "tiny") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TINY + extra)
    return path


def window(step, loss, ms=10.0, skipped=0):
    return {"step": step, "loss": loss, "step_time_ms": ms, "samples_per_s": 8000.0 / ms, "data_wait_ms": 0.0,
            "skipped_total": skipped}


def trial(name, role="candidate", losses=(2.3, 2.2, 2.1, 2.0), ms=10.0, skipped=0, knobs=None):
    t = T.Trial(name, knobs or {}, role, run_id=f"run-{name}", status="completed")
    t.windows = [window(4 * (i + 1), loss, ms, skipped) for i, loss in enumerate(losses)]
    return T.measure(t, [{"kind": "step", **w} for w in t.windows])


# --- the accuracy guard and the verdict (pure functions over step windows) -------------------------

def test_guard_rejects_nonfinite_loss_storm_and_drift_and_accepts_noise():
    ref = trial("fp32", "reference")
    band, how = V.noise_band(ref, trial("fp32 seed 2", "band", losses=(2.31, 2.22, 2.09, 2.02)))
    assert how == "two fp32 seeds" and band == pytest.approx(0.04)  # 2% of the final loss: the floor
    assert V.guard(trial("bf16", losses=(2.3, 2.21, 2.12, 2.03)), ref, band) is None
    assert V.guard(trial("faster-learner", losses=(2.3, 1.9, 1.5, 1.2)), ref, band) is None  # one-sided
    assert "non-finite loss at step 12" in V.guard(trial("fp16", losses=(2.3, 2.2, None, None)), ref, band)
    assert "skipped-step storm: 8 of 16" in V.guard(trial("fp16+scaler", skipped=8), ref, band)
    assert "left fp32's noise band at step 12: 2.2000 vs 2.1000" in V.guard(trial("drift", losses=(2.3, 2.2, 2.2, 2.3)), ref, band)


def test_judge_picks_fastest_accurate_candidate_and_stays_in_fp32_within_noise():
    trials = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=10.2),
              trial("bf16", ms=6.0), trial("fp16", losses=(2.3, float("nan"), 2.1, 2.0), ms=3.0)]
    winner, _, _ = V.judge(trials)
    assert winner.candidate == "bf16" and winner.verdict == "WINNER"
    assert trials[3].verdict.startswith("rejected: non-finite loss")
    text = " ".join(V.explain(trials, winner, 0.05, "cpu"))
    assert "bf16 wins at 1.68x" in text and "fp16 was rejected: non-finite loss" in text

    slow = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=10.0), trial("bf16", ms=9.8)]
    winner, _, needed = V.judge(slow)
    assert winner.role == "reference" and winner.verdict == "WINNER (stay in fp32)"
    assert slow[2].verdict == "accurate, within timing noise"
    assert V.explain(slow, winner, needed, "cpu")[0].startswith("Stay in fp32")


def test_a_search_stopped_after_one_measured_trial_recommends_nothing_and_says_what_it_measured():
    stopped = T.Trial("bf16", {}, "candidate", run_id="run-bf16", status="stopped", reason="interrupted")
    trials = [trial("fp32", "reference", ms=10.0), stopped, T.Trial("fp16+scaler", {}, "candidate",
                                                                     status="skipped", reason="interrupted")]
    winner, _, _, partial = V.settle(trials, interrupted=True)
    assert winner is None and partial == "not enough trials to recommend: only fp32 was measured"
    assert trials[0].verdict == "fp32 reference" and not any(t.verdict.startswith("WINNER") for t in trials)
    text = " ".join(V.explain_partial(trials, partial, interrupted=True))
    assert "Not enough trials to recommend: only fp32 was measured (fp32: 10.0 ms/step, 800 samples/s)" in text
    assert "was stopped" in text and "larger budget" in text

    # the budget cut it short the same way (no Ctrl-C): still no recommendation
    cut = [trial("fp32", "reference"), trial("fp32 seed 2", "band"),
           T.Trial("bf16", {}, "candidate", status="skipped", reason="budget: about 40 s needed, 12 s left")]
    winner, _, _, partial = V.settle(cut, interrupted=False)
    assert winner is None and partial.endswith("only fp32 and fp32 seed 2 were measured")
    assert "ran out of budget" in V.explain_partial(cut, partial, interrupted=False)[0]


def test_a_stopped_search_that_judged_a_candidate_and_a_finished_one_still_recommend():
    judged = [trial("fp32", "reference", ms=10.0), trial("bf16", ms=6.0),
              T.Trial("fp16+scaler", {}, "candidate", status="skipped", reason="interrupted")]
    winner, _, _, partial = V.settle(judged, interrupted=True)
    assert partial == "" and winner.candidate == "bf16"
    # a whole plan where nothing beat fp32 (here: the larger batch ran out of memory) stays in fp32
    done = [trial("fp32", "reference"), trial("fp32 seed 2", "band"),
            T.Trial("fp32 batch 16", {}, "candidate", status="oom")]
    winner, _, _, partial = V.settle(done, interrupted=False)
    assert partial == "" and winner.verdict == "WINNER (stay in fp32)"


def test_bad_keys_are_one_line_errors(cli, tmp_path):
    preset = tiny_preset(tmp_path)
    proc = cli("tune", str(preset), "--keys", "optim.fused")
    assert proc.returncode == 2 and "not a preset key; the fused optimizer is always on where supported" in proc.stderr
    proc = cli("tune", str(preset), "--set", "amp.dtype=bfloat16")
    assert proc.returncode == 2 and "tune searches that" in proc.stderr
    assert "Traceback" not in proc.stderr and not Path("runs").exists()


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
    deadline = time.monotonic() + 240
    result_file = None
    while time.monotonic() < deadline:
        found = list(runs_dir.glob("*.tune.json")) if runs_dir.exists() else []
        if found:
            result_file = found[0]
            trials = json.loads(result_file.read_text())["trials"]
            if len(trials) >= 2 and trials[-1]["status"] == "running" and \
                    (runs_dir / trials[-1]["run_id"] / "events.jsonl").exists():
                break
        time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("the second trial never started")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    result = json.loads(result_file.read_text())
    assert result["status"] == "interrupted"
    fp32, second = result["trials"][0], result["trials"][1]
    assert fp32["ms_per_step"] is not None and second["status"] == "stopped" and second["reason"] == "interrupted"
    assert "fp32" in out and "interrupted after 2 trial(s)" in out and "saved the winner" not in out
    assert "stopping…" in out and "WINNER" not in out and "Not enough trials to recommend" in out
    assert result["winner"] is None and result["partial"].startswith("not enough trials to recommend: only fp32")
    end = events(runs_dir / second["run_id"])[-1]
    assert end["kind"] == "end" and end["status"] == "stopped"  # the trial was stopped, not left running
    assert not presetmod.saved_dir().joinpath("tiny-tuned.toml").exists()


# --- the dashboard ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_dashboard_t_tunes_in_the_background_q_stops_it_and_s_saves_the_winner(tmp_path, runs_dir):
    from dashboard_support import async_test, until
    from textual.widgets import DataTable, OptionList

    from amptui.core.config import values as cfgmod
    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.home import HomeScreen
    from amptui.dashboard.screens.tune import TuneScreen
    from amptui.dashboard.screens.tune_start import TuneStartModal

    tiny = tiny_preset(tmp_path)
    presetmod.save_preset("tiny", cfgmod.build_config(cfgmod.read_toml(tiny)))

    @async_test
    async def drive():
        app = make_app(runs_dir)
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

            def third_trial_running():  # fp32 and bf16 measured: a verdict can be given
                trials = (screen.result or {}).get("trials", [])
                return len(trials) >= 3 and trials[-1]["status"] == "running" and \
                    (runs_dir / trials[-1]["run_id"] / "events.jsonl").exists()

            await until(pilot, third_trial_running, timeout=300, step=0.5)
            assert screen.result["budget_s"] == 360
            assert screen.query_one("#tune-table", DataTable).row_count == 3
            await pilot.press("q")  # stops the search, stays on the screen, says so at once
            await pilot.pause(0.1)
            assert "stopping…" in str(screen.query_one("#tune-title").render())
            await until(pilot, lambda: screen.result.get("status") == "interrupted", timeout=120, step=0.5)
            assert app.screen is screen
            winner = screen.result["winner"]
            assert winner in ("fp32", "bf16"), screen.result  # the trials judged before the stop
            await pilot.press("s")
            await until(pilot, lambda: presetmod.saved_dir().joinpath("tiny-tuned.toml").exists())
            await pilot.press("q")  # the search has ended: back home
            await until(pilot, lambda: isinstance(app.screen, HomeScreen))
            assert "tiny-tuned" in [p.name for p in app.screen.presets]
            return winner

    winner = None
    try:
        winner = drive()
    finally:  # a failed test must not leave its background tune running
        for result in runs_dir.glob("*.tune.json"):
            if json.loads(result.read_text())["status"] == "running":
                try:
                    os.kill(json.loads(result.read_text())["pid"], signal.SIGINT)
                except OSError:
                    pass
    assert presetmod.find_preset("tiny-tuned").config().amp.autocast is (winner != "fp32")


def test_run_compile_wraps_the_module_the_loop_calls():
    from torch import nn

    from amptui.core.config import values as cfgmod
    from amptui.trainer.models import compile_if_asked

    module = nn.Linear(2, 2)
    assert compile_if_asked(module, cfgmod.build_config({}).run) is module
    compiled = compile_if_asked(module, cfgmod.build_config({}, {"run.compile": True}).run)
    assert compiled is not module and compiled._orig_mod is module  # checkpoints keep the plain module's keys
