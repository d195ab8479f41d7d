"""How a distributed run is shown: `amptui runs` (table and JSON) and the dashboard's run list name
DDP and FSDP beside the precision; `compare` (CLI table, JSON, csv, the dashboard's compare screen)
has memory per rank: each rank's kept state from its start record, and each rank's peak from its
own events file, with what was measured said honestly; `ab`'s +reduce refusal and progress lines.
All on canned runs (tests/support/dist.py), in this process."""

from __future__ import annotations

import csv
import io
import json
import re
from io import StringIO

import pytest
from rich.text import Text
from support.cli import one_clear_line
from support.dashboard import QUICK, app_for, async_test, copy_runs, home_ready, settled, until
from support.dist import DDP_RUN, FSDP_RUN, MIB, PEAKS, write_dist_run

from amptui.core.comparison import compare, runsummary
from amptui.core.run import runs

pytestmark = pytest.mark.timeout(120)
POLICY = {"param_dtype": "bfloat16", "reduce_dtype": "float32", "sharded_dtype": "float32"}


@pytest.fixture
def pair(runs_dir):
    """The DDP run (the baseline) and the FSDP run of the same model."""
    return write_dist_run(runs_dir, "ddp"), write_dist_run(runs_dir, "fsdp")


# --- the run list ----------------------------------------------------------------------------------

def test_the_run_list_names_ddp_and_fsdp_beside_the_precision(pair, cli):
    ddp, fsdp = (runs.load_run(p) for p in pair)
    assert (ddp.precision_label, fsdp.precision_label) == ("bf16 DDP x2", "bf16 FSDP x2")
    assert ddp.as_json()["dist"] == {"mode": "ddp", "world_size": 2}
    assert fsdp.as_json()["dist"] == {"mode": "fsdp", "world_size": 2, "policy": POLICY}

    table = cli("runs", check=True).stdout.splitlines()
    assert "bf16 FSDP x2" in next(line for line in table if line.startswith(FSDP_RUN))
    assert "bf16 DDP x2" in next(line for line in table if line.startswith(DDP_RUN))
    listed = {r["run_id"]: r for r in json.loads(cli("runs", "--format", "json", check=True).stdout)}
    assert listed[FSDP_RUN]["dist"]["policy"] == POLICY and listed[FSDP_RUN]["precision"] == "bf16"
    assert listed[DDP_RUN]["dist"] == {"mode": "ddp", "world_size": 2}


def test_a_one_process_run_says_only_its_precision(root):
    info = runs.load_run(root / QUICK)
    assert info.dist is None and info.precision_label == info.precision == "bf16"


@async_test
async def test_the_dashboards_run_list_shows_the_same_at_80_columns_and_filters_on_it(root):
    from amptui.dashboard.widgets.runtable import RunTable

    write_dist_run(root, "ddp")
    write_dist_run(root, "fsdp")
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=5)
        table = screen.query_one(RunTable)
        await settled(pilot)
        for run_id, said in ((FSDP_RUN, "bf16 FSDP x2"), (DDP_RUN, "bf16 DDP x2")):
            line = table.render_line(table.run_ids.index(run_id) + 1).text
            assert said in line and line.rstrip().endswith("0:01"), line  # the duration stays in sight
        await pilot.press("f", *"fsdp")
        await until(pilot, lambda: table.run_ids == [FSDP_RUN])


@async_test
async def test_an_fsdp_abs_long_labels_give_way_before_the_duration_does(root):
    """At 80 columns "fp16+reduce+scaler FSDP x2" does not fit: the preset gives way first, then the
    precision's shorter forms (the variant name kept whole where it fits), and the duration stays."""
    from amptui.core.config.variants import expand
    from amptui.dashboard.widgets.runtable import RunTable

    names = ["fp32", "bf16", "bf16+reduce", "fp16+reduce+scaler"]
    for i, (_, keys) in enumerate(expand(",".join(names), "cpu")):
        write_dist_run(root, "fsdp", f"20261124-10{i}000-gpt-text-ab{i}", keys)
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=7)
        table = screen.query_one(RunTable)
        await settled(pilot)
        lines = {i: table.render_line(table.run_ids.index(f"20261124-10{i}000-gpt-text-ab{i}") + 1).text
                 for i in range(4)}
        assert all(line.rstrip().endswith("0:01") for line in lines.values()), lines
        assert "fp32 FSDP x2" in lines[0] and "bf16 FSDP x2" in lines[1]
        assert "bf16+reduce" in lines[2] and "…" in lines[3] and "scaler" in lines[3]


# --- compare: memory per rank -----------------------------------------------------------------------

def test_compare_sets_fsdps_state_per_rank_against_ddps_whole_replica(pair):
    ddp, fsdp = compare.compare_rows([runsummary.summarize(p) for p in pair])
    assert (ddp.dist, fsdp.dist) == ("DDP x2", "FSDP x2")
    assert ddp.state_mem == 12 * MIB and fsdp.state_mem == 6 * MIB  # parameters + AdamW's two moments
    assert ddp.state_saving == 0.0 and fsdp.state_saving == pytest.approx(0.5)
    # each rank's peak from its own file; peak mem is the highest rank's (rank 1 here, not rank 0's)
    assert ddp.rank_peaks == list(PEAKS["ddp"]) and fsdp.rank_peaks == list(PEAKS["fsdp"])
    assert ddp.peak_mem == PEAKS["ddp"][1] and fsdp.peak_mem == PEAKS["fsdp"][1]
    assert fsdp.memory_saving == pytest.approx(1 - 705 / 710)
    assert fsdp.peak_measure == "peak_rss"


def test_a_rank_file_named_with_other_digits_is_left_out(pair):
    """A damaged run folder: "events.rank\u00b2.jsonl" passes str.isdigit() but is no rank number;
    compare leaves it out instead of failing."""
    ddp = pair[0]
    (ddp / "events.rank\u00b2.jsonl").write_text((ddp / "events.rank1.jsonl").read_text())
    row = compare.compare_rows([runsummary.summarize(ddp)])[0]
    assert row.rank_peaks == list(PEAKS["ddp"])


def test_compare_cli_shows_memory_per_rank_and_says_what_was_measured(pair, cli):
    ids = [p.name for p in pair]
    text = cli("compare", *ids, check=True).stdout
    header, first, second = text.splitlines()[:3]
    for column in ("dist", "state/rank", "state saving"):
        assert column in header
    assert "DDP x2" in first and "12.0 MiB" in first
    assert "FSDP x2" in second and "6.0 MiB" in second and "+50.0%" in second
    said = " ".join(text.split())
    assert "state/rank = the parameters + optimizer state a rank keeps, from its start record" in said
    assert "peak mem = the highest rank's peak" in said and "peak RSS, the whole process" in said
    assert "on a CPU it hides most of a small model's saving" in said

    rows = json.loads(cli("compare", *ids, "--format", "json", check=True).stdout)
    assert [r["dist"] for r in rows] == ["DDP x2", "FSDP x2"]
    assert [r["state_mem"] for r in rows] == [12 * MIB, 6 * MIB] and rows[1]["state_saving"] == pytest.approx(0.5)
    assert rows[1]["rank_peaks"] == list(PEAKS["fsdp"]) and rows[1]["peak_measure"] == "peak_rss"
    table = list(csv.DictReader(io.StringIO(cli("compare", *ids, "--format", "csv", check=True).stdout)))
    assert table[1]["rank_peaks"] == " ".join(str(p) for p in PEAKS["fsdp"])


def test_a_one_process_compare_keeps_its_table(root, cli):
    from support.dashboard import SCALER

    text = cli("compare", QUICK, SCALER, "--runs-dir", str(root), check=True).stdout
    header = text.splitlines()[0]
    assert "dist" not in header and "state" not in header and "memory per rank" not in text


@async_test
async def test_the_compare_screen_shows_the_state_saving_and_the_note(runs_dir):
    from amptui.dashboard.screens.compare.screen import CompareScreen

    copy_runs(runs_dir)
    ddp, fsdp = write_dist_run(runs_dir, "ddp"), write_dist_run(runs_dir, "fsdp")
    app = app_for(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await home_ready(pilot, rows=3)
        app.open_compare([ddp, fsdp])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.drawn())
        screen = app.screen
        table = screen.query_one("#compare-table")
        headers = [str(c.label) for c in table.columns.values()]
        assert headers[:8] == ["#", "precision", "dist", "loss @ step 8", "speed-up", "val acc", "mem saving",
                           "state saving"], headers
        fsdp_row = [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(FSDP_RUN)]
        assert "FSDP x2" in fsdp_row and "+50.0%" in fsdp_row
        notes = screen.query_one("#compare-notes").render()
        assert "per rank: state = parameters + optimizer state a rank keeps" in str(notes)
        assert "peak RSS (the whole process" in str(notes)
        assert "state saving" in screen.table_text("markdown")


# --- ab ---------------------------------------------------------------------------------------------

def test_a_reduce_variant_without_fsdp_is_refused_naming_the_variant(cli, runs_dir):
    line = one_clear_line(cli("ab", "gpt-text", "--variants", "fp32,bf16+reduce"))
    assert "--variants bf16+reduce" in line and "--set dist.mode=fsdp" in line
    assert "amp.reduce_dtype" not in line  # a key the user never set
    assert not runs_dir.exists() or not any(runs_dir.rglob("*.json"))  # no A/B group left behind


def test_ab_progress_labels_leave_a_space_after_the_longest_variant():
    from amptui.cli.ab import variant_labels
    from amptui.cli.console import ProgressPrinter

    labels = variant_labels(["fp32", "bf16", "bf16+reduce", "fp16+scaler"])
    assert labels[0] == "[1/4] fp32        " and labels[2] == "[3/4] bf16+reduce "
    out = StringIO()
    printer = ProgressPrinter(out=out, label=labels[2])
    printer.feed([{"v": 1, "kind": "start", "t": 1.0, "rank": 0, "run_id": "r", "precision": "fp32", "total_steps": 8},
                  {"v": 1, "kind": "end", "t": 2.0, "rank": 0, "status": "completed", "total_time_s": 1.0,
                   "steps": 8, "final_loss": 1.0}])
    printer.finish(1.0)
    assert "[3/4] bf16+reduce completed:" in out.getvalue()


def test_an_unsharded_runs_start_record_counts_the_whole_model_each_rank_keeps():
    from torch import nn

    from amptui.trainer.fsdp import replica_bytes

    # 4x4 weights + 4 biases in float32, and AdamW's two moments of each
    assert replica_bytes(nn.Linear(4, 4), "adamw", 0.0) == {"params_bytes": 80, "optimizer_bytes": 160,
                                                            "model_params_bytes": 80}
    assert replica_bytes(nn.Linear(4, 4), "sgd", 0.0)["optimizer_bytes"] == 0  # no momentum: no state
    assert replica_bytes(nn.LazyLinear(4), "adamw", 0.0) is None  # no shape before its first forward


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("cols", [80, 100])
def test_runs_on_a_narrow_terminal_shortens_the_label_before_squeezing_columns(runs_dir, monkeypatch, cols):
    from amptui.cli.tables import print_runs
    from amptui.core.config.variants import expand

    for i, (_, keys) in enumerate(expand("bf16,bf16+reduce,fp16+reduce+scaler", "cpu")):
        write_dist_run(runs_dir, "fsdp", f"20261124-10{i}000-gpt-text-ab{i}", keys)
    monkeypatch.setenv("COLUMNS", str(cols))
    out = _Terminal()
    print_runs(runs.list_runs(runs_dir), out)
    lines = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).splitlines() if line.strip()]
    assert all(len(line) <= cols for line in lines), lines
    rows = {line.split()[0]: line for line in lines[1:]}
    assert all(row.rstrip().endswith("0:01") for row in rows.values()), lines  # every column whole
    said = rows["20261124-102000-gpt-text-ab2"]
    assert ("fp16+reduce+scaler FSDP x2" in said) == (cols == 100) and "fp16+reduce+scaler" in said


def test_a_damaged_rank_number_is_not_placed(pair):
    """A record (or a file name) claiming rank 10^12 must not make compare build a list that long."""
    ddp, _ = pair
    with open(ddp / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"v": 1, "kind": "step", "t": 1.0, "rank": 10 ** 12, "step": 9, "epoch": 1,
                             "mem": {"rss": 1, "peak_rss": 1}}) + "\n")
    (ddp / f"events.rank{10 ** 12}.jsonl").write_text((ddp / "events.rank1.jsonl").read_text())
    row = compare.compare_rows([runsummary.summarize(ddp)])[0]
    assert row.rank_peaks == list(PEAKS["ddp"])
