"""The non-finite step pinned on the code that made it (issue 51.5-6): every module call is checked on the
replayed step, containers included, and the first whose output is non-finite while its inputs are finite
is named (the innermost; a reused module by its call and the module it was called in), with what the
check saw; for a script on its first non-finite step record with no setting; advice follows the dtype.
In process, tiny models on the CPU (float16 autocast works there)."""

from __future__ import annotations

from support.records import events

from amptui.telemetry.nonfinite import trace_first_nonfinite


def causes(recs):
    return [r for r in recs if r["kind"] == "warning" and r.get("code") == "nonfinite_cause"]


def test_a_scripts_boom_is_named_on_its_first_non_finite_record_without_any_setting(runs_dir):
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "boom.py", log_every=2)
    assert error is None, error
    found = causes(recs)
    assert len(found) == 1, [r for r in recs if r["kind"] == "warning"]
    cause, said = found[0]["cause"], found[0]["message"]
    first_record = next(r for r in recs if r["kind"] == "step")
    assert cause["module"] == "boom" and cause["step"] == first_record["step"] == 2, cause
    assert "head" not in said and "from finite inputs" in said and "after boom.lin" in said
    assert "keep boom out of float16" in said and "bfloat16" in said
    assert not [r for r in recs if r["kind"] == "numerics" and not r.get("traced")]  # nothing was sampled


def test_a_reused_relu_after_an_overflowing_conv_names_the_conv(runs_dir):
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "reused_relu.py", log_every=2)
    assert error is None, error
    found = causes(recs)
    assert len(found) == 1 and found[0]["cause"]["module"] == "conv2", [r for r in recs if r["kind"] == "warning"]
    assert events(run_dir)[-1]["kind"] == "end"


def test_a_run_whose_loss_went_non_finite_is_marked_wherever_runs_are_listed(runs_dir, cli):
    """Issue 51.7: runs whose loss went inf/NaN were listed `completed` with no mark: `runs` (table and
    JSON), the home screen's run table and compare now mark them."""
    import json

    from support.scripthooks import record_script

    from amptui.core.comparison import compare, runsummary
    from amptui.core.run import runs
    from amptui.dashboard.widgets.runtable import RunTable

    bad_dir, _, error = record_script(runs_dir, "boom.py", log_every=2)
    assert error is None
    good_dir, _, error = record_script(runs_dir, "plain_fp32.py", "--steps", "2", log_every=1)
    assert error is None
    bad, good = runs.load_run(bad_dir), runs.load_run(good_dir)
    assert (bad.status, bad.status_shown) == ("completed", "completed NaN") and "inf/NaN" in bad.nonfinite
    assert (good.status_shown, good.nonfinite) == ("completed", "")
    table = cli("runs", "--runs-dir", str(runs_dir), check=True).stdout
    line = next(x for x in table.splitlines() if x.startswith(bad.run_id))
    assert "completed NaN" in line
    listed = {r["run_id"]: r for r in json.loads(cli("runs", "--runs-dir", str(runs_dir), "--format", "json").stdout)}
    assert listed[bad.run_id]["nonfinite"] and listed[bad.run_id]["status"] == "completed"
    assert listed[good.run_id]["nonfinite"] == ""
    home = RunTable()
    home.groups, home._short = {}, {}
    assert "completed NaN" in str(home._cells(bad)[3]) and str(home._cells(good)[3]) == "completed"
    rows = compare.compare_rows([runsummary.summarize(good_dir), runsummary.summarize(bad_dir)])
    assert rows[1].nonfinite and "completed NaN" in compare.render(rows, "table")
    assert json.loads(compare.render(rows, "json"))[1]["nonfinite"] == bad.nonfinite


def test_an_ab_summary_names_what_the_replay_found_not_what_later_samples_credit(runs_dir):
    """Issue 51.5: an A/B summary said "inf/NaN first in conv1" against the run's own warning; with
    sampling on (every later sample credits another layer) it names the replay's module."""
    from support.scripthooks import record_script

    from amptui.core.comparison import comparenotes, runsummary

    run_dir, recs, error = record_script(runs_dir, "reused_relu.py", log_every=2, sets={"numerics.every": 1})
    assert error is None
    assert [r["cause"]["module"] for r in causes(recs)] == ["conv2"]
    # the samples too: the reused relu holds the worst of its two calls, placed at its last, after conv2
    sampled = [r["first_nonfinite"]["module"] for r in recs if r["kind"] == "numerics" and r.get("first_nonfinite")]
    assert sampled and set(sampled) == {"conv2"}, sampled
    said = comparenotes.headroom_note([runsummary.summarize(run_dir)])
    assert said is not None and "inf/NaN first in conv2" in said and "first in relu" not in said, said


def test_a_forward_that_cannot_be_replayed_leaves_the_recording_on(runs_dir):
    """A forward that takes gradients itself (a physics-informed net) cannot run again under no_grad:
    the replay's error once turned recording off for the rest of the run; it falls back to sampling."""
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "grad_in_forward.py", log_every=2)
    assert error is None, error
    steps = [r["step"] for r in recs if r["kind"] == "step"]
    assert steps and steps[-1] == 8 and recs[-1]["kind"] == "end" and recs[-1]["status"] == "completed", steps
    assert [r for r in recs if r["kind"] == "numerics" and not r.get("traced")]  # the fallback sampled
    from amptui.core.comparison import comparenotes, runsummary

    said = comparenotes.headroom_note([runsummary.summarize(run_dir)])  # and says so, not "replaying"
    assert said is not None and "found by sampling" in said and "replaying" not in said, said


def test_a_non_finite_run_is_replayed_once_not_on_every_later_record(runs_dir, monkeypatch):
    """The replay runs on the first non-finite record only: a NaN that is no overflow (found, not said)
    used to be replayed again on every later record, one more forward each."""
    from support.scripthooks import record_script

    from amptui.telemetry.scripthooks import replaycause

    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return trace_first_nonfinite(*args, **kwargs)

    monkeypatch.setattr(replaycause, "trace_first_nonfinite", counted)
    run_dir, recs, error = record_script(runs_dir, "log_nan.py", log_every=1)
    assert error is None, error
    assert len([r for r in recs if r["kind"] == "step"]) == 10
    assert len(calls) == 1, len(calls)
    assert len([r for r in recs if r["kind"] == "numerics" and r.get("traced")]) == 1


def test_a_first_step_overflow_is_replayed_when_every_step_is_recorded(runs_dir):
    """log.every = 1: the first record is step 1, whose forward ran before amptui knew the model (nothing
    was kept to replay); the replay waits for the next record instead of handing over to sampling."""
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "boom.py", log_every=1)
    assert error is None, error
    found = causes(recs)
    assert [c["cause"]["module"] for c in found] == ["boom"], [r["message"] for r in found]
    assert found[0]["cause"].get("traced") and found[0]["cause"]["step"] == 2


def test_a_namedtuple_batch_is_kept_for_the_replay_without_stopping_the_recording(runs_dir):
    """Keeping the last forward's inputs rebuilt a namedtuple from one generator: the first training
    forward raised and turned recording off. Namedtuples (PackedSequence too) are rebuilt field by field."""
    from support.scripthooks import record_script

    run_dir, recs, error = record_script(runs_dir, "namedtuple_batch.py", log_every=2)
    assert error is None, error
    assert [r["step"] for r in recs if r["kind"] == "step"][-1] == 6 and recs[-1]["kind"] == "end"
    found = causes(recs)
    # the overflow is the model's own code (boom's output times the batch's scale), measured again in float32
    assert [c["cause"]["module"] for c in found] == ["model"] and found[0]["cause"].get("traced"), found
    assert found[0]["cause"]["after"] == "boom" and found[0]["cause"]["value"] > 65504
