"""Issue 43: one run, one samples/s, one step time, one final loss, whichever view shows them
(core.figures): the run screen's header and throughput panel, `amptui run`'s end summary, compare
and what the export's rows add up to."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from support.dashboard import QUICK, copy_runs

from amptui.cli.console import ProgressPrinter
from amptui.core import export
from amptui.core.comparison import compare as cmp
from amptui.core.comparison import runsummary
from amptui.core.figures import steady_of_rows
from amptui.core.fmt import fmt_loss, fmt_rate
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.screens.run.header import stats_line


def test_one_recorded_run_shows_the_same_figures_in_every_view(tmp_path):
    run_dir = copy_runs(tmp_path / "runs") / QUICK
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]

    summary = runsummary.summarize(run_dir)
    row = cmp.compare_rows([summary])[0]
    steady, ms, loss = summary.steady_samples_per_s, summary.steady_step_ms, summary.final_loss
    assert steady and ms and loss is not None
    # the run's last window runs at another pace than its steady state: a view showing it would disagree
    last_rate = [r for r in records if r["kind"] == "step"][-1]["samples_per_s"]
    assert f"{last_rate:,.0f}" != f"{steady:,.0f}"

    model = RunModel()
    for rec in records:
        model.add(rec)
    assert model.run.steady_samples_per_s == pytest.approx(steady) and model.run.steady_step_ms == pytest.approx(ms)
    assert f"samples/s {steady:,.0f}" in stats_line(model).plain          # the run screen's header
    assert row.samples_per_s == pytest.approx(steady) and row.final_loss == pytest.approx(loss)  # compare
    assert model.run.final_loss == pytest.approx(loss)

    out = io.StringIO()
    export.write(run_dir, "json", out)
    rows = json.loads(out.getvalue())
    from_export = steady_of_rows(rows, summary.total_steps)
    assert from_export.samples_per_s == pytest.approx(steady) and from_export.step_ms == pytest.approx(ms)
    assert rows[-1]["loss"] == pytest.approx(loss)  # final loss: the last step record's loss

    said = io.StringIO()
    printer = ProgressPrinter(console=Console(file=said, width=200))
    printer.feed(records)
    printer.finish(summary.total_time_s)
    text = said.getvalue()
    assert f"final loss {fmt_loss(loss)}" in text
    assert f"{fmt_rate(steady)} samples/s, {ms:,.1f} ms/step (steady)" in text


def test_a_tune_trial_and_compare_of_the_same_run_agree(tmp_path):
    """`amptui tune` reads its trials with the same definition (it used the median of its windows)."""
    from amptui.tune import plan as T

    run_dir = copy_runs(tmp_path / "runs") / QUICK
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    summary = runsummary.summarize(run_dir)
    trial = T.measure(T.Trial("fp32", {}, "reference", run_id=QUICK), records)
    assert trial.samples_per_s == pytest.approx(summary.steady_samples_per_s)
    assert trial.ms_per_step == pytest.approx(summary.steady_step_ms)
    rates = [r["samples_per_s"] for r in records if r["kind"] == "step"][1:]
    import statistics

    assert f"{statistics.median(rates):,.0f}" != f"{trial.samples_per_s:,.0f}"  # the old median disagreed
    compiled = T.measure(T.Trial("fp32", {"run.compile": True}, "reference", run_id=QUICK), records)
    state = runsummary.summarize(run_dir)
    state.config = {"run": {"compile": True}}  # a compiled run: both leave its first two windows out
    assert compiled.ms_per_step == pytest.approx(state.steady_step_ms)
