"""`amptui tune --script FILE`: the tune's search over the precisions amptui applies to an
unmodified fp32 script (run.apply_amp), each trial the script's whole run with its `-- ARGS`,
judged as a preset's trials; the winner named as the command that runs it. The loop is tiny (a
32-wide MLP, 12 steps): this CPU's speeds do not matter here, only the trials, their labels and
that the search ends in a verdict."""

from __future__ import annotations

import pytest
from support.cli import one_clear_line
from support.paths import SCRIPTS

from amptui.tune.scriptsearch import use_command

SCRIPT = SCRIPTS / "plain_fp32.py"


def test_use_command_names_the_winner_and_the_scripts_arguments():
    assert use_command("train.py", ["--lr", "0.1"], "bf16") == \
        "amptui run --script train.py --set run.apply_amp=bf16 -- --lr 0.1"
    assert use_command("my train.py", [], "") == "amptui run --script 'my train.py'"  # fp32: the script as written


@pytest.mark.parametrize("extra, said", [
    (["--keys", "data.batch_size,amp.dtype,run.compile"], "--keys data.batch_size, run.compile: not for a script"),
    (["--set", "data.batch_size=8"], "--set data.batch_size: not for a script run"),
    (["--set", "run.apply_amp=bf16"], "--set run.apply_amp: tune --script searches it"),
    (["--budget", "0"], "--budget 0"),
])
def test_tune_script_refusals_are_one_line_and_leave_nothing(cli, runs_dir, extra, said):
    line = one_clear_line(cli("tune", "--script", str(SCRIPT), *extra))
    assert said in line, line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_tune_with_a_preset_and_a_script_or_neither_is_refused(cli, runs_dir):
    assert "give a preset or a script, not both" in one_clear_line(cli("tune", "quickstart", "--script", str(SCRIPT)))
    assert "no such file" in one_clear_line(cli("tune", "--script", "missing.py"))
    assert "name a preset" in one_clear_line(cli("tune"))
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_a_stopped_script_search_names_what_it_lacks_in_the_scripts_words():
    """Stopped (Ctrl-C, q) after fp32 and part of bf16: no winner; what is missing is the script's plan
    (fp32 again, fp16+scaler, ...), and a stopped trial's step is not "of 20" (a script runs its own length)."""
    from support.tune import measured

    from amptui.tune import partial as P
    from amptui.tune.scriptsearch import SCRIPT_PRECISIONS, candidate

    trials = [measured("fp32", "reference"), measured("bf16", ms=60.0, last_step=8, status="stopped",
                                                      reason="interrupted")]
    for t in trials:
        t.knobs = candidate(t.candidate).knobs
    ended = P.conclude(trials, True, {"precision"}, "cpu", planned=SCRIPT_PRECISIONS)
    assert ended["winner"] is None
    assert ended["partial"] == ("not enough trials to recommend: the search was stopped before it measured bf16 "
                                "to the end, fp16+scaler, bf16+scaler, fp16 and fp32 again (the timing noise)")
    said = " ".join(ended["explanation"])
    assert "bf16 ran at 2.00x fp32 for 8 steps, but its accuracy check did not finish" in said, said
    assert "of 20" not in said and "second seed" not in said
