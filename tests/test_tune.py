"""`amptui tune`: real trials through the normal trainer (tiny models, few steps), the accuracy
guard, the out-of-memory path, the tuned preset, Ctrl-C, and the dashboard's tune screen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from support.cli import amptui
from support.records import events
from support.waits import wait_until

from amptui.core.config import presets as presetmod
from amptui.core.errors import UserError
from amptui.tune import partial as P
from amptui.tune import plan as T
from amptui.tune import report
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
    assert "bf16 wins at 1.67x" in text and "fp16 was rejected: non-finite loss" in text

    slow = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=10.0), trial("bf16", ms=9.8)]
    winner, _, needed = V.judge(slow)
    assert winner.role == "reference" and winner.verdict == "WINNER (stay in fp32)"
    assert slow[2].verdict == "accurate, within timing noise"
    assert V.explain(slow, winner, needed, "cpu")[0].startswith("Stay in fp32")


@pytest.mark.parametrize("fp32_losses, said", [
    ((4.0, 3.5, 3.0, 2.5, 2.0), "(its loss against fp32's: too short to judge (still falling: ±1 = 50% of loss 2); "
                                "a longer run judges accuracy)"),
    ((2.0, 2.4, 2.0, 2.4, 2.0), "(its loss against fp32's: band too wide to judge (noisy: ±0.8 = 40% of loss 2); "
                                "a longer run judges accuracy)"),
    ((2.3, 2.29, 2.28, 2.27, 2.26), "with its loss inside fp32's noise band"),
])
def test_tunes_winner_says_why_fp32s_band_cannot_judge_its_loss(fp32_losses, said):
    """Issue 43: "its loss inside fp32's noise band" is said only where the band can judge; the same
    words as the compare screen's otherwise (core/comparison/lossgaps.py), and in the timing line's reason."""
    from amptui.tune import partial

    trials = [trial("fp32", "reference", losses=fp32_losses, ms=10.0), trial("bf16", losses=fp32_losses, ms=5.0)]
    result = partial.conclude(trials, False, {"precision"}, "cpu", planned=("bf16",))
    assert result["winner"] == "bf16"
    assert f"bf16 wins at 2.00x fp32's samples/s {said}: " in " ".join(result["explanation"])
    assert (result["band_unjudged"] is None) == said.startswith("with its loss")


def test_a_search_whose_every_trial_failed_crowns_nothing_not_fp32():
    """Issue 40 item 10: fp32 measured, every candidate that ran failed: "stay in fp32" would be a
    verdict nothing measured; no winner, and the CLI's reason names each failure."""
    failed = [T.Trial(name, {}, run_id=f"run-{name}", status="failed", reason="SystemExit: exit code 3")
              for name in ("bf16", "fp16")]
    trials = [trial("fp32", "reference"), trial("fp32 seed 2", "band"), *failed,
              T.Trial("fp16+scaler", {}, status="skipped", reason="slow here")]
    winner, _, _ = V.judge(trials)
    assert winner is None and not any(t.verdict.startswith("WINNER") for t in trials)
    result = {"status": "done", "trials": [asdict(t) for t in trials]}
    assert T.failed_search(result) == "every trial failed (bf16: SystemExit: exit code 3; fp16: SystemExit: exit code 3)"
    one_ran = [trials[0], failed[0], trial("fp16")]  # one candidate measured: a verdict stands
    assert T.failed_search({"status": "done", "trials": [asdict(t) for t in one_ran]}) is None


def test_every_speed_up_is_read_against_the_fp32_reference_run():
    """fp32 reads 1.00x and its second seed what it measured against it (issue 25: they read 1.58x
    and 0.42x against the mean of the two); the second fp32 run is a control either way it lands
    (issue 51): one at 0.5x leaves a 1.25x candidate untold, not a winner."""
    busy = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=20.0), trial("bf16", ms=8.0)]
    winner, _, needed = V.judge(busy)
    assert [t.speedup for t in busy] == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(1.25)]
    assert needed == pytest.approx(1.0) and winner is None
    assert busy[2].verdict == "accurate, too noisy to tell: its control, fp32 again, measured 0.50x"
    quiet = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=10.1), trial("bf16", ms=8.0)]
    winner, _, needed = V.judge(quiet)
    assert needed == T.MIN_GAIN and winner.candidate == "bf16"
    quick_seed = [trial("fp32", "reference", ms=10.0), trial("fp32 seed 2", "band", ms=8.0), trial("bf16", ms=8.5)]
    winner, _, needed = V.judge(quick_seed)
    assert quick_seed[1].speedup == pytest.approx(1.25) and needed == pytest.approx(0.25)
    assert winner is None and quick_seed[2].verdict.startswith("accurate, too noisy to tell: 1.18x, inside its noise")


def test_a_tune_whose_control_ran_as_fast_as_the_winner_names_no_winner():
    """Issue 51 item 1: bf16 was crowned "WINNER at 2.88x" while fp32 with another seed, the control,
    ran 2.88x the fp32 baseline in the same table. No winner, no "stay in fp32": too noisy, and why."""
    trials = [trial("fp32", "reference", ms=28.8), trial("bf16", ms=10.0), trial("fp32 seed 2", "band", ms=10.0),
              trial("fp16+scaler", ms=300.0)]
    result = P.conclude(trials, False, {"precision"}, "cpu", planned=("bf16", "fp16+scaler"))
    assert result["winner"] is None and not any(t["verdict"].startswith("WINNER") for t in result["trials"])
    assert result["trials"][1]["verdict"] == "accurate, too noisy to tell: its control, fp32 again, measured 2.88x"
    text = " ".join(result["explanation"])
    assert "No winner: the timings were too noisy to tell whether bf16 is faster than fp32 (bf16 measured 2.88x" in text
    assert "Its control, fp32 seed 2, ran at 2.88x the first fp32 run" in text and "Stay in fp32" not in text
    assert report.status_words(result) == "done, no winner" and T.winner_of(result) is None
    assert T.no_winner_words(result) == "the timings were too noisy to tell a winner"


def test_a_candidate_clear_of_its_control_and_noise_still_wins():
    trials = [trial("fp32", "reference", ms=10.0), trial("bf16", ms=3.0), trial("fp32 seed 2", "band", ms=8.5)]
    winner, _, _ = V.judge(trials)
    assert winner.candidate == "bf16" and winner.verdict == "WINNER"


# --- a search that ended early: no winner, what was measured, what a verdict needs ------------------

def test_the_reviewers_stop_names_no_winner_and_says_what_was_measured_and_what_is_missing():
    """q while fp16+scaler ran, after fp32, bf16 (stopped early: far slower) and fp32's second seed."""
    from support.tune import DIMS, reviewers_stop

    trials = reviewers_stop()
    winner, _, _, partial = P.settle(trials, interrupted=True, dims=DIMS)
    assert winner is None and not any(t.verdict.startswith("WINNER") for t in trials)
    assert partial == ("not enough trials to recommend: the search was stopped before it measured fp16+scaler to "
                       "the end, bf16-pure, torch.compile and a larger batch")
    assert [t.verdict for t in trials[:3]] == ["fp32 reference", f"stopped early: over {T.SLOW_FACTOR:g}x slower "
                                               "than fp32, it cannot win", "fp32, second seed (noise band)"]
    assert trials[3].verdict == "stopped: interrupted at step 8 of 20"
    assert trials[0].speedup == pytest.approx(1.0) and trials[2].speedup == pytest.approx(120 / 125)
    text = " ".join(P.explain_partial(trials, partial, interrupted=True))
    assert "nothing to compare" not in text and "WINNER" not in text
    assert "bf16 951.3 ms/step, 67 samples/s, 0.13x fp32" in text
    assert "Of the setups judged so far, none beat fp32 by more than the timing noise" in text
    assert "fp16+scaler ran at 1.33x fp32 for 8 of its 20 steps, but its accuracy check did not finish" in text
    assert "let the search finish" in text and "no preset was saved" in text


def test_a_stopped_search_with_a_faster_accurate_setup_calls_it_ahead_not_the_winner():
    trials = [trial("fp32", "reference", ms=10.0), trial("bf16", ms=6.0),
              T.Trial("fp16+scaler", {}, "candidate", status="skipped", reason="interrupted")]
    winner, _, _, partial = P.settle(trials, interrupted=True)
    assert winner is None and partial.endswith("before it measured fp16+scaler and fp32 with a second seed (the "
                                               "timing noise)")
    assert trials[1].verdict == V.LEADING == "accurate, faster (best so far)"
    text = " ".join(P.explain_partial(trials, partial, interrupted=True))
    assert "So far bf16 is ahead: accurate and 1.67x fp32's samples/s. Not a verdict" in text

    # stopped after its last trial: still the user's stop, not a verdict
    done = [trial("fp32", "reference"), trial("fp32 seed 2", "band"), trial("bf16", ms=6.0)]
    winner, _, _, partial = P.settle(done, interrupted=True)
    assert winner is None and partial == "not enough trials to recommend: the search was stopped before it gave its verdict"


def test_a_search_stopped_after_one_measured_trial_says_nothing_else_was_measured():
    stopped = T.Trial("bf16", {}, "candidate", run_id="run-bf16", status="stopped", reason="interrupted")
    trials = [trial("fp32", "reference", ms=10.0), stopped, T.Trial("fp16+scaler", {}, "candidate",
                                                                     status="skipped", reason="interrupted")]
    winner, _, _, partial = P.settle(trials, interrupted=True, dims={"precision"})
    assert winner is None and partial == ("not enough trials to recommend: the search was stopped before it measured "
                                          "bf16, fp16+scaler, bf16-pure and fp32 with a second seed (the timing noise)")
    assert trials[0].verdict == "fp32 reference" and not any(t.verdict.startswith("WINNER") for t in trials)
    text = " ".join(P.explain_partial(trials, partial, interrupted=True))
    assert "Measured: fp32 10.0 ms/step, 800 samples/s (the reference)." in text
    assert "No other precision setup was measured, so nothing could be judged against fp32 yet" in text


def test_the_budget_leaves_a_verdict_only_when_the_precision_search_was_whole():
    cut = [trial("fp32", "reference"), trial("fp32 seed 2", "band"),
           T.Trial("bf16", {}, "candidate", status="skipped", reason="budget: about 40 s needed, 12 s left")]
    winner, _, _, partial = P.settle(cut, interrupted=False)
    assert winner is None and partial == "not enough trials to recommend: the search ran out of budget before it measured bf16"
    assert "tune again with a larger budget" in " ".join(P.explain_partial(cut, partial, interrupted=False))
    # only the knobs after the precision search were cut: the best of what the budget allowed
    knobs_cut = [trial("fp32", "reference"), trial("fp32 seed 2", "band"), trial("bf16", ms=6.0),
                 T.Trial("bf16 +compile", {"run.compile": True}, status="skipped", reason="budget: about 170 s needed, "
                         "60 s left")]
    winner, _, _, partial = P.settle(knobs_cut, interrupted=False, dims={"precision", "compile"})
    assert partial == "" and winner.candidate == "bf16" and winner.verdict == "WINNER"
    # a whole plan where nothing beat fp32 (here: the larger batch ran out of memory) stays in fp32
    done = [trial("fp32", "reference"), trial("fp32 seed 2", "band"),
            T.Trial("fp32 batch 16", {}, "candidate", status="oom")]
    winner, _, _, partial = P.settle(done, interrupted=False)
    assert partial == "" and winner.verdict == "WINNER (stay in fp32)"


def test_the_report_of_a_stopped_tune_shows_no_winner_even_from_an_older_result(tmp_path):
    """What the CLI and the dashboard both read (tune/report.py): a result an older amptui wrote for
    the reviewer's stop (status interrupted, yet winner fp32 and a WINNER row) names no winner."""
    from support.tune import finished_search, write_old_stopped_tune, write_tune

    old = T.read_result(write_old_stopped_tune(tmp_path))
    assert T.winner_of(old) is None and report.save_hint(old, "s") == ""
    assert report.status_words(old) == "stopped: partial result, no winner"
    assert [cells[-1] for cells, _ in report.rows(old)][0] == "fp32 reference"
    assert not any("WINNER" in line for line in report.lines(old))
    with pytest.raises(UserError, match="no winner to save"):
        T.save_winner(old)
    new = T.read_result(write_tune(tmp_path, finished_search(), interrupted=False, tid="t-done"))
    assert T.winner_of(new) == "bf16" and report.status_words(new) == "done"
    assert report.save_hint(new, "s") == "s saves the winner as preset quickstart-tuned."
    assert [(cells[0], style) for cells, style in report.rows(new) if cells[-1] == "WINNER"] == [("bf16", "bold green")]


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


# --- the dashboard ------------------------------------------------------------------------------------

def drawn(widget) -> str:
    """A widget's lines as the terminal shows them, joined into one line of words."""
    return " ".join(" ".join(widget.render_line(y).text.split()) for y in range(widget.size.height))


async def open_tune(pilot, path: Path, announce: bool = False):
    from support.dashboard import home_ready, settled, until

    from amptui.dashboard.screens.tune.screen import TuneScreen

    await home_ready(pilot, rows=3)
    screen = TuneScreen(path, None, "quickstart", announce=announce)
    pilot.app.push_screen(screen)
    await until(pilot, lambda: screen.result is not None)
    await settled(pilot)
    return screen


def table_text(screen) -> str:
    from textual.widgets import DataTable

    table = screen.query_one("#tune-table", DataTable)
    return " | ".join(str(cell) for row in range(table.row_count) for cell in table.get_row_at(row))


def test_the_tune_screen_of_a_stopped_search_names_no_winner_and_offers_no_save(root):
    """Issue 25: after q the screen said "stopped (partial result)" beside "WINNER (stay in fp32)" and
    "s saves the winner". Both the result this amptui writes and the one an older one wrote."""
    from support.dashboard import Notes, app_for, async_test, until
    from support.tune import reviewers_stop, write_old_stopped_tune, write_tune

    @async_test
    async def check(path: Path) -> tuple[str, str]:
        app = app_for(root)
        notes = Notes().install(app)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_tune(pilot, path)
            assert "WINNER" not in table_text(screen) and "fp32 reference" in table_text(screen)
            assert "1.00x" in table_text(screen)  # fp32 against itself
            title, why = drawn(screen.query_one("#tune-title")), drawn(screen.query_one("#tune-explain"))
            assert title.startswith("tune quickstart · stopped: partial result, no winner"), title
            assert "s saves" not in why and "WINNER" not in why
            assert screen.check_action("save_winner", ()) is False  # the footer hides s
            await pilot.press("s")
            await until(pilot, lambda: "no winner to save" in notes.text())
            assert not presetmod.saved_dir().joinpath("quickstart-tuned.toml").exists()
            return why, str(screen.query_one("#tune-explain-box").border_subtitle)

    why, hint = check(write_tune(root, reviewers_stop(), interrupted=True))
    assert hint.startswith("more below")  # the Why panel scrolls at 80x24, and says so
    assert why.startswith("Not enough trials to recommend: the search was stopped before it measured fp16+scaler")
    assert "bf16 951.3 ms/step" in why and "accuracy check did not finish" in why
    why, _ = check(write_old_stopped_tune(root, tid="20261124-090000-quickstart-tune-0ld1"))
    assert "The search was stopped before it ended: partial result, no winner" in why


def test_the_tune_screen_of_a_finished_search_announces_it_and_saves_the_winner(root):
    from support.dashboard import Notes, app_for, async_test, until
    from support.tune import finished_search, write_tune

    @async_test
    async def check() -> None:
        app = app_for(root)
        notes = Notes().install(app)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_tune(pilot, write_tune(root, finished_search(), interrupted=False), announce=True)
            assert "tuning quickstart for up to 10 min" in notes.text()  # once the search is under way
            assert "bf16 | 60.0 | 1067 | 310.0 MiB | 2.00x | WINNER" in table_text(screen)
            assert "s saves the winner as preset quickstart-tuned." in drawn(screen.query_one("#tune-explain"))
            await pilot.press("s")
            await until(pilot, lambda: presetmod.saved_dir().joinpath("quickstart-tuned.toml").exists())

    check()
    assert presetmod.find_preset("quickstart-tuned").config().amp.dtype == "bfloat16"


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


def test_run_compile_wraps_the_module_the_loop_calls():
    from torch import nn

    from amptui.core.config import values as cfgmod
    from amptui.trainer.models import compile_if_asked

    module = nn.Linear(2, 2)
    assert compile_if_asked(module, cfgmod.build_config({}).run) is module
    compiled = compile_if_asked(module, cfgmod.build_config({}, {"run.compile": True}).run)
    assert compiled is not module and compiled._orig_mod is module  # checkpoints keep the plain module's keys
