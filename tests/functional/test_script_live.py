"""`amptui run --script` as `python script.py` shows it (issue 34): the script's output live on the
terminal above amptui's progress line, or through a pipe on stdout with amptui's lines on stderr;
its traceback from its own first frame; a script that ends before its first step lists its
precision as not seen; a float32 run's start record names float32; a run none of whose steps
trained is said to be one."""

from __future__ import annotations

import io

from support.script_live import _script
from support.scripthooks import by_kind, record_script, warnings_by_code

from amptui.cli.outputecho import OutputEcho
from amptui.core.config.precision import Precision
from amptui.core.config.values import read_toml
from amptui.core.run import runs

# --- fast: the pieces ------------------------------------------------------------------------------

def test_a_float32_start_record_names_float32_not_the_presets_unused_dtype():
    record = Precision(False, "bfloat16", False).as_record()
    assert record["dtype"] == "float32" and record["words"] == "fp32" and record["autocast"] is False
    assert Precision.from_record(record) is not None and Precision.from_record(record).short == "fp32"
    assert Precision(True, "bfloat16", False).as_record()["dtype"] == "bfloat16"


def test_a_script_that_fails_before_its_first_step_lists_as_not_seen(runs_dir, isolated):
    script = _script(isolated, "import torch\nraise ValueError('before any step')\n", "early.py")
    run_dir, recs, error = record_script(runs_dir, str(script))
    assert isinstance(error, ValueError)
    assert "amp" not in read_toml(run_dir / "config.toml")  # no [amp] autocast = false: nothing was seen
    start = by_kind(recs, "start")[0]
    assert start["precision"] == "" and "amp" not in start["config"]
    info = runs.load_run(run_dir)
    assert info.status == "failed" and info.precision == ""  # `amptui runs` says "not seen"


def test_a_float32_scripts_start_record_says_float32(runs_dir):
    _, recs, error = record_script(runs_dir, "float32_args.py")
    assert error is None
    precision = by_kind(recs, "start")[0]["precision"]
    assert precision["autocast"] is False and precision["dtype"] == "float32" and precision["words"] == "fp32"


def test_a_run_whose_steps_were_all_skipped_is_told_no_step_trained(runs_dir):
    _, recs, error = record_script(runs_dir, "mistakes.py", "never-trains", log_every=5)
    assert error is None and recs[-1]["steps"] == 40 and recs[-1]["skipped_total"] == 40
    said = warnings_by_code(recs)
    assert "no optimizer step has trained yet: the GradScaler skipped all" in said["no_step_trained"]
    assert "init_scale" in said["no_step_trained"] and "1e+30" in said["no_step_trained"]
    # live, not only at the end: before the last step record
    kinds = [(r["kind"], r.get("code"), r.get("step")) for r in recs]
    assert kinds.index(("warning", "no_step_trained", None)) < kinds.index(("step", None, 40))
    assert "Harmless:" not in said.get("scheduler_after_skip", "")


def test_a_short_run_that_never_trained_hears_it_at_its_end(runs_dir):
    _, recs, _ = record_script(runs_dir, "mistakes.py", "sched-after-skip", log_every=2)
    assert recs[-1]["steps"] == 10 and recs[-1]["skipped_total"] == 10
    assert warnings_by_code(recs)["no_step_trained"].startswith("no optimizer step trained: the GradScaler skipped all 10")


def test_a_run_that_trains_after_calibrating_hears_no_such_alarm(runs_dir):
    _, recs, error = record_script(runs_dir, "amp_recipe.py", "--init-scale", str(2.0 ** 24), "--lr", "0.3")
    assert error is None and "no_step_trained" not in warnings_by_code(recs)


def test_output_echo_in_a_pipe_passes_whole_lines_and_leaves_the_hooks_warnings_to_their_records(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"old session\n")
    out, own = io.BytesIO(), []
    echo = OutputEcho(log, len(b"old session\n"), None, out, own.append)
    with log.open("ab") as f:
        f.write(b"one\n[amptui] warning: said from its record\n[amptui] 0 training steps recorded\ntwo, unfinished")
    echo.poll()
    assert out.getvalue() == b"one\n" and own == ["[amptui] 0 training steps recorded"]  # amptui's stream
    echo.poll(final=True)
    assert out.getvalue() == b"one\ntwo, unfinished\n"
    echo.close()


def test_output_echo_keeps_only_the_latest_state_of_a_line_redrawn_in_place(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"")
    out = io.BytesIO()
    echo = OutputEcho(log, 0, None, out)
    with log.open("ab") as f:
        for i in range(1000):  # tqdm's bar for a whole epoch: no newline until it ends
            f.write(f"\r{i}/1000".encode())
    echo.poll()
    assert out.getvalue() == b"" and echo.pending == b"999/1000"  # held, and no bigger than one state
    with log.open("ab") as f:
        f.write(b"\r\ndone\r\n")
    echo.poll()
    assert out.getvalue() == b"999/1000\r\ndone\r\n"  # \r\n line ends pass through whole
