"""`amptui tune`: real trials through the normal trainer (tiny models, few steps), the accuracy
guard, the out-of-memory path, the tuned preset, Ctrl-C, and the dashboard's tune screen."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from amptui.tune import partial as P
from amptui.tune import plan as T
from amptui.tune import report
from amptui.tune import verdict as V


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


def test_run_compile_wraps_the_module_the_loop_calls():
    from torch import nn

    from amptui.core.config import values as cfgmod
    from amptui.trainer.models import compile_if_asked

    module = nn.Linear(2, 2)
    assert compile_if_asked(module, cfgmod.build_config({}).run) is module
    compiled = compile_if_asked(module, cfgmod.build_config({}, {"run.compile": True}).run)
    assert compiled is not module and compiled._orig_mod is module  # checkpoints keep the plain module's keys
