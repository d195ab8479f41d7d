"""What the script hooks count in a step (docs/your-own-code.md, "Steps, loss and epochs"): no-grad
work inside the step's rhythm is the step's, evaluation apart; an accumulation step's loss is the
sum of its micro-batches' (divided) losses; a loop with no torch.optim optimizer is told why it
records nothing; a non-finite loss and a backoff name the right step and parameters; no epoch
without a training DataLoader. Scripts under tests/scripts/ that never import amptui, run through
the bootstrap in this process (as test_scripthooks does); also on the oldest torch (.ci/run)."""

from __future__ import annotations

import json

import pytest
from support.scripthooks import by_kind, record_script, warnings_by_code

from amptui.core.run import runs
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.screens.run.header import progress_line
from amptui.telemetry.alarms import ScaleAlarms

pytestmark = pytest.mark.timeout(300)

# step_metrics.py's sleeps: per step's accuracy, per eval batch (2 batches: an evaluation is 2 x EVAL_S).
# Long enough that a busy machine's compute (a step took ~190 ms at load 14) stays well inside the
# margins between right and wrong (EVAL_S, 500 ms, either side of the bound).
METRIC_S, EVAL_S = 0.2, 0.5


@pytest.mark.parametrize("plain", [False, True], ids=["dataloader", "plain-lists"])
def test_a_per_step_no_grad_metric_is_step_time_and_evaluation_is_not(runs_dir, plain):
    """Training accuracy under no_grad after every step (METRIC_S) stays in the steps' time; the
    2-batch evaluation after each epoch (2 x EVAL_S) does not, and is the epoch's eval_time_s.
    A record every step: wrongly attributed, a step would take < METRIC_S, or the evaluation would
    land whole on the next step's record (>= METRIC_S + 2 x EVAL_S); the bound lies halfway.
    Without a DataLoader the point is the same rule with no loader to tell an evaluation by (a
    second forward of the model) and no epochs: 2 steps an epoch, and no evaluation after the last
    (nothing would be measured after it)."""
    shape = ["--plain", "--train-batch", "32", "--no-final-eval"] if plain else []
    run_dir, recs, error = record_script(runs_dir, "step_metrics.py", "--metric-s", str(METRIC_S), "--eval-s", str(EVAL_S),
                                         *shape, log_every=1)
    steps_run = 4 if plain else 8
    assert error is None and recs[-1]["status"] == "completed" and recs[-1]["steps"] == steps_run
    steps = by_kind(recs, "step")
    assert [s["step"] for s in steps] == list(range(1, steps_run + 1))
    times = [s["step_time_ms"] for s in steps]
    # a record comes at its step's optimizer step, before that step's metric: the first record's
    # window holds no metric, every later one the metric of the step before it (and after an
    # epoch's last step, the evaluation, when wrongly attributed)
    assert all(1000 * METRIC_S <= t < 1000 * (METRIC_S + EVAL_S) for t in times[1:]), times
    epochs = by_kind(recs, "epoch")
    if plain:  # no DataLoader: no epochs, and no "ep 1" anywhere
        assert not epochs and all("epoch" not in s for s in steps)
        assert runs.load_run(run_dir).epoch == 0
        model = RunModel(run_dir.name)
        model.feed(recs)
        assert "epoch" not in progress_line(model).plain
    else:
        assert [s["epoch"] for s in steps] == [1] * 4 + [2] * 4 and len(epochs) == 2
        evals = [e["eval_time_s"] for e in epochs]
        assert all(2 * EVAL_S <= e < 2 * EVAL_S + 3 * METRIC_S for e in evals), evals  # not the 4 metrics


def test_an_accumulation_step_records_the_true_loss_not_a_fraction(runs_dir, tmp_path):
    """loss / 4 per micro-batch, 4 micro-batches per optimizer step (the usual pattern): the step's
    loss is their sum, the true mean loss the script itself computes -- not 1/4 of it."""
    losses_file = tmp_path / "losses.json"
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--accumulate", "4", "--steps", "16", "--epochs", "1",
                                   "--losses", str(losses_file), log_every=2)
    assert error is None
    true = json.loads(losses_file.read_text())
    steps = by_kind(recs, "step")
    assert len(true) == recs[-1]["steps"] == 4 and [s["step"] for s in steps] == [2, 4]
    expected = [(true[0] + true[1]) / 2, (true[2] + true[3]) / 2]
    assert [s["loss"] for s in steps] == pytest.approx(expected, rel=1e-3)
    assert by_kind(recs, "end")[0]["final_loss"] == pytest.approx(expected[-1], rel=1e-3)


def test_a_loop_with_no_torch_optimizer_is_told_why_it_records_nothing(runs_dir, capsys):
    """A hand-written SGD update (p -= lr * p.grad): said once, live (the run starts so the warning
    shows), and again at the end in one line: no torch.optim optimizer stepped, what to do."""
    run_dir, recs, error = record_script(runs_dir, "manual_sgd.py")
    assert error is None
    assert recs[0]["kind"] == "start"
    said = [r for r in by_kind(recs, "warning") if r.get("code") == "no_optimizer_step"]
    assert len(said) == 1
    assert "no torch.optim optimizer stepped" in said[0]["message"]
    assert "torch.optim" in said[0]["message"] and "amptui.Monitor" in said[0]["message"]
    assert recs.index(said[0]) < len(recs) - 1 and recs[-1]["status"] == "completed" and recs[-1]["steps"] == 0
    err = capsys.readouterr().err
    assert "[amptui] 0 training steps recorded: no torch.optim optimizer stepped, so nothing could be counted" in err
    assert runs.load_run(run_dir).status == "completed"


def test_a_script_that_trains_is_not_told_about_optimizers(runs_dir):
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--steps", "4", "--epochs", "1", log_every=2)
    assert error is None and "no_optimizer_step" not in warnings_by_code(recs)


def test_a_non_finite_loss_names_its_own_step_not_the_records(runs_dir):
    """Step 3's batch holds a NaN, the record covers steps 1-5: the warning says step 3."""
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--nan-at", "3", "--steps", "10", "--epochs", "1",
                                   "--init-scale", "256", log_every=5)
    assert error is None
    message = warnings_by_code(recs)["loss_not_finite"]
    assert "not finite (NaN or inf) at step 3:" in message, message


def test_a_non_finite_loss_is_said_without_a_grad_scaler_too(runs_dir):
    """bfloat16 autocast, no GradScaler (its NaN is as real as float16's): the same warning, naming
    step 3; the script hooks once said it only for a loop with a scaler."""
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--dtype", "bfloat16", "--no-scaler", "--nan-at", "3",
                                   "--steps", "4", "--epochs", "1", log_every=4)
    assert error is None and recs[-1]["steps"] == 4
    message = warnings_by_code(recs)["loss_not_finite"]
    assert "not finite (NaN or inf) at step 3:" in message and "without torch.autocast" in message, message


def test_a_float32_loops_non_finite_loss_advice_drops_autocast_and_a_window_without_loss_is_quiet():
    alarms = ScaleAlarms(growth_interval=2000, dtype="float32", bf16_available=False)
    alarms.own_loop = True
    assert alarms.observe([], 10, None, None) == []  # no loss measured (a script's non-scalar backward): not "NaN"
    said = alarms.observe([], 20, None, float("inf"))
    assert [a.code for a in said] == ["loss_not_finite"] and "autocast" not in said[0].message


def test_a_window_without_per_step_losses_says_its_span():
    alarms = ScaleAlarms(growth_interval=5, dtype="float16", bf16_available=False)
    said = alarms.observe([], 10, 256.0, float("nan"), loss_at="in steps 6-10")
    assert [a.code for a in said] == ["loss_not_finite"] and "(NaN or inf) in steps 6-10:" in said[0].message


def test_every_backoff_names_its_parameters_after_a_quiet_window_too(runs_dir):
    """float16 + GradScaler with a high init_scale on a CPU, 40 steps, a record every 5: the scale
    calibrates, then overflows again now and then, also after windows with no backoff (when the
    overflow tracer is otherwise disarmed): each backoff names the overflowing parameters."""
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--init-scale", str(2.0 ** 24), "--lr", "0.3")
    assert error is None
    backoffs = [r for r in by_kind(recs, "scaler") if r["event"] == "backoff"]
    windows_with_backoff = {(b["step"] - 1) // 5 for b in backoffs}
    after_quiet = [b for b in backoffs if (b["step"] - 1) // 5 - 1 not in windows_with_backoff and b["step"] > 5]
    assert after_quiet, backoffs  # the case this test is about happened
    assert all(b["overflow"] for b in backoffs), [(b["step"], b["overflow"]) for b in backoffs]
    assert all(set(b["overflow"]) <= {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
               for b in backoffs)
