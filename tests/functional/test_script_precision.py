"""A script run's precision is what its loop was seen to do, never a config default: before the
loop's first step (or with the hooks off, for good) config.toml says no precision and every reader
(`amptui runs` table and JSON, the dashboard's run list, `compare`) says "not seen"; once the
hooks see the first step it is the loop's ("fp16+scaler"). And `amptui run PRESET --script` is
refused: a preset's keys would be silently ignored. The slow tests start the real command on
tests/scripts/gated.py (never imports amptui), which waits for a file before its first step."""

from __future__ import annotations

import json

import pytest
from support.cli import one_clear_line
from support.dashboard import app_for, async_test, home_ready, settled
from support.paths import SCRIPTS
from support.records import record, write_records

from amptui.core.comparison import runsummary
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import UNSEEN, Precision
from amptui.core.run import runs
from amptui.core.stream.events import VERSION
from amptui.core.stream.records import End

pytestmark = pytest.mark.timeout(180)
GATED = SCRIPTS / "gated.py"


def script_run(runs_dir, name: str = "gated"):
    """A script run's folder as `amptui run --script` makes it, before the script has run."""
    cfg = cfgmod.build_config({}, {"run.script": str(GATED), "run.name": name})
    folder = runs.create_folder(runs_dir, name)
    runs.write_new(folder, cfg, "# a script run, before its first step")
    return folder.path


def listed(cli) -> dict[str, dict]:
    return {r["run_id"]: r for r in json.loads(cli("runs", "--format", "json", check=True).stdout)}


def row_of(cli, run_id: str) -> str:
    return next(line for line in cli("runs", check=True).stdout.splitlines() if line.startswith(run_id))


# --- in this process: the folder as made, every reader -------------------------------------------

def test_a_fresh_script_folder_claims_no_precision_and_every_list_says_not_seen(runs_dir, cli):
    run_dir = script_run(runs_dir)
    assert "amp" not in cfgmod.read_toml(run_dir / "config.toml"), "no [amp] before the loop shows it"
    info = runs.load_run(run_dir)
    assert (info.precision, info.precision_words, info.precision_label) == ("", "", UNSEEN)
    assert listed(cli)[run_dir.name]["precision"] == ""
    assert listed(cli)[run_dir.name]["epochs"] is None, "a script's epochs are its own loop's, not a default"
    assert UNSEEN in row_of(cli, run_dir.name) and "bf16" not in row_of(cli, run_dir.name)


def test_a_start_record_says_it_when_config_toml_was_not_rewritten(runs_dir):
    """The hooks rewrite config.toml at the first step; should that write fail, the start record's
    precision is the run's."""
    run_dir = script_run(runs_dir)
    said = Precision(True, "float16", True).as_record()
    start = {"v": VERSION, "kind": "start", "t": 1.0, "rank": 0, "run_id": run_dir.name, "precision": said,
             "epochs": 2}
    write_records(run_dir / "events.jsonl", [start, record(End(status="completed", total_time_s=1.0, steps=3), 2.0)])
    info = runs.load_run(run_dir)
    assert (info.precision, info.precision_words) == ("fp16+scaler", "autocast float16 + GradScaler")
    assert info.epochs == 2, "the epochs its loop (a Monitor in it) said"


def test_compare_says_not_seen_for_a_script_run_that_never_showed_it(runs_dir, cli):
    run_dir = script_run(runs_dir)
    write_records(run_dir / "events.jsonl", [record(End(status="completed", total_time_s=1.0, steps=0), 2.0)])
    assert runsummary.summarize(run_dir).precision_words == ""
    out = cli("compare", run_dir.name, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith(run_dir.name))
    assert UNSEEN in line and "bf16" not in line, out
    said = json.loads(cli("compare", run_dir.name, "--format", "json", check=True).stdout)
    assert "bf16" not in json.dumps(said), said


@async_test
async def test_the_dashboards_run_list_says_not_seen(runs_dir):
    from amptui.dashboard.widgets.runtable import RunTable

    run_dir = script_run(runs_dir)
    app = app_for(runs_dir)
    async with app.run_test(size=(120, 24)) as pilot:
        screen = await home_ready(pilot, rows=1)
        table = screen.query_one(RunTable)
        await settled(pilot)  # the row drawn
        line = table.render_line(table.run_ids.index(run_dir.name) + 1).text
        assert UNSEEN in line and "bf16" not in line, line


@pytest.mark.parametrize("how", [["--script", str(GATED)], ["-m", "json.tool"]])
def test_a_preset_with_a_script_is_refused_with_nothing_written(cli, runs_dir, how):
    line = one_clear_line(cli("run", "quickstart", *how, "--set", "log.every=2"))
    assert f"quickstart {how[0]}" in line and "takes no preset" in line and "run.name" in line, line
    assert not runs_dir.exists(), "nothing on disk"


def test_ctrl_c_says_where_a_script_stops(runs_dir):
    """Ctrl-C on `amptui run --script` stops the loop at its next optimizer step: amptui writes no
    checkpoint for a script, so the line does not promise one (a preset run's does)."""
    from amptui.cli.run_commands import stop_point

    assert stop_point(script_run(runs_dir)) == "at the script's next optimizer step"
    cfg = cfgmod.build_config({}, {"run.name": "quickstart"})
    folder = runs.create_folder(runs_dir, "quickstart")
    runs.write_new(folder, cfg, "# a preset run")
    assert stop_point(folder.path) == "checkpoint first"


def test_a_trainer_run_with_a_damaged_config_takes_its_start_records_precision(runs_dir):
    """config.toml unreadable (ConfigError): the run lists by what its start record said, not "not seen"."""
    cfg = cfgmod.build_config({}, {"run.name": "quickstart"})
    folder = runs.create_folder(runs_dir, "quickstart")
    runs.write_new(folder, cfg, "# a preset run")
    (folder.path / "config.toml").write_text("[run\n")
    said = Precision(True, "float16", True).as_record()
    start = {"v": VERSION, "kind": "start", "t": 1.0, "rank": 0, "run_id": folder.path.name, "precision": said}
    write_records(folder.path / "events.jsonl", [start])
    info = runs.load_run(folder.path)
    assert info.error and info.precision == "fp16+scaler"


def test_a_scripts_usage_error_is_its_last_line_not_a_progress_bar():
    """A script that drew a progress bar (redrawn with carriage returns) and then exited with a code: its error is the
    line it ended with."""
    import io

    from amptui.jobs.stderrtail import StderrTail

    tail = StderrTail(io.StringIO())
    tail.write(" 10%|#   | 1/10\r 50%|#####  | 5/10\r100%|##########| 10/10\n")
    tail.write("train.py: error: the data went away\n")
    assert tail.last_lines(2) == ["100%|##########| 10/10", "train.py: error: the data went away"]
    tail.write("epoch 3 80%|####\rdone\n")
    assert tail.last_lines(1) == ["done"]
