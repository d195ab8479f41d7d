"""Why the loss scale moves: overflow attribution, alarms, an lr schedule that skipped steps
do not advance, and achieved FLOP/s in the step records."""

import pytest
from support.cli import amptui
from support.records import events, only_run


def backoff(step, old, new, names=("fc.weight",)):
    return {"step": step, "event": "backoff", "old_scale": old, "new_scale": new, "overflow": list(names)}


@pytest.mark.slow
def test_poisoned_gradients_collapse_the_scale_without_moving_the_lr(runs_dir):
    amptui("run", "scaler-lab", "--set", "debug.inject_inf_every=1", "--set", "run.epochs=1",
           "--set", "amp.init_scale=1024", "--set", "sched.name=cosine", "--set", "log.every=4", check=True)
    run_dir = only_run(runs_dir)
    recs = events(run_dir)
    steps = [r for r in recs if r["kind"] == "step"]
    assert len({s["lr"] for s in steps}) == 1, "an all-skipped run leaves the lr where it was"
    assert steps[-1]["skipped_total"] == steps[-1]["step"] == 32
    assert steps[-1]["scale"] < 1
    warnings = [r for r in recs if r["kind"] == "warning"]
    assert any(w["code"] == "scale_below_one" for w in warnings)
    backoffs = [r for r in recs if r["kind"] == "scaler"]
    assert all(b["event"] == "backoff" and b["overflow"] == ["head.bias"] for b in backoffs), \
        "only the poisoned parameter is named"
    log = (run_dir / "output.log").read_text()
    assert "lr_scheduler" not in log and "optimizer.step()" not in log


@pytest.mark.slow
def test_step_records_carry_achieved_tflops_and_the_start_the_peak(runs_dir):
    amptui("run", "quickstart", "--set", "run.max_steps=6", check=True)
    recs = events(only_run(runs_dir))
    start = recs[0]
    assert start["step_flops"] > 0 and start["peak_tflops"] > 0
    steps = [r for r in recs if r["kind"] == "step"]
    assert all(0 < s["tflops"] < 10 * start["peak_tflops"] for s in steps)
