"""A run that never said how long it is (a script's Monitor with no total_steps or epochs) reads
in words in every view: never a Python `None`, never a bare `?`, and no "0%" for a finished run."""

from __future__ import annotations

import io
import re
import shutil

import pytest
import torch
from rich.console import Console
from support.dashboard import async_test, settled, until
from support.records import only_run
from support.screens import screen_lines
from torch import nn

import amptui
from amptui.core.fmt import fmt_lr, fmt_of, fmt_progress, fmt_total
from amptui.core.stream.events import EventReader

pytestmark = pytest.mark.timeout(120)

LEAKS = re.compile(r"\bNone\b|/\?|\?\s|\?$")


def no_leak(text: str) -> None:
    bad = [line for line in text.splitlines() if LEAKS.search(line)]
    assert not bad, bad


@pytest.fixture
def untold_run(runs_dir):
    """A real Monitor run of 2 epochs x 12 steps that never says its totals."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with amptui.Monitor("untold", optimizer=opt, model=model, log_every=4) as mon:
        for _ in range(2):
            for _ in range(12):
                loss = model(torch.randn(4, 8)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                mon.step(loss)
            mon.epoch(val_loss=0.5)
    return only_run(runs_dir)


def test_formatters_say_an_unknown_total_in_words():
    assert fmt_of(3, 20) == "3/20" and fmt_of(3, None) == "3" and fmt_of(None, None) == "-"
    assert fmt_progress(96, 200) == "step 96/200"
    assert fmt_progress(96, None) == "step 96 (total unknown)"
    assert fmt_total(200) == "200 steps" and fmt_total(None) == "total steps unknown"
    assert fmt_lr(0.01) == "0.01" and fmt_lr(3e-4) == "0.0003" and fmt_lr(1e-5) == "1e-05" and fmt_lr(None) == "-"


@pytest.mark.parametrize("on_terminal", [False, True])
def test_run_script_output_of_a_monitor_without_totals(untold_run, on_terminal):
    """What `amptui run --script` prints for it: the records go through the same printer."""
    from amptui.cli.console import ProgressPrinter

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100) if on_terminal else None
    printer = ProgressPrinter(out=out, console=console)
    printer.feed(EventReader(untold_run / "events.jsonl").read())
    printer.redraw()
    printer.finish(1.0)
    text = "\n".join(screen_lines(out.getvalue()))
    no_leak(text)
    text = re.sub(r" *\n(?=[a-z])", " ", text)  # the terminal wraps the first line at word boundaries
    assert "total steps unknown" in text
    assert "epoch 1: train loss" in text and "epoch 2: train loss" in text
    assert "completed: 24 steps" in text
    if on_terminal:
        assert "24 steps" in text  # the live line's count, without a total
    else:
        assert re.search(r"step \d+ \(total unknown\)  ep 1  loss", text), text


def test_runs_and_compare_of_a_monitor_without_totals(untold_run, cli):
    runs = cli("runs", check=True).stdout
    no_leak(runs)
    assert re.search(rf"{untold_run.name}.*\b24\b", runs)
    no_leak(cli("compare", untold_run.name, check=True).stdout)


@async_test
async def test_the_run_screen_of_a_monitor_without_totals(untold_run):
    """Finished: the bar full and "step 24/24" (a completed run's total is what it ran). Ended
    without a total (here: killed, its end record gone): no bar, no percentage, the step in words."""
    from textual.widgets import ProgressBar, Static

    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.run.screen import RunScreen

    killed = untold_run.with_name(untold_run.name + "-killed")
    shutil.copytree(untold_run, killed)
    lines = (killed / "events.jsonl").read_text().splitlines(keepends=True)
    (killed / "events.jsonl").write_text("".join(line for line in lines if '"kind":"end"' not in line))
    (killed / "run.json").unlink(missing_ok=True)

    for run_dir, words, bar_shown in ((untold_run, "step 24/24 · epoch 2", True),
                                      (killed, "step 24 (total unknown) · epoch 2", False)):
        app = make_app(run_dir.parent, watch=run_dir)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.run.step == 24
                        and app.screen.model.status != "running")
            screen = app.screen
            await until(pilot, screen.drawn)  # the screen renders the model on a timer
            await settled(pilot)
            progress = str(screen.query_one("#progress-text", Static).render())
            assert words in progress, progress
            bar = screen.query_one("#progress", ProgressBar)
            assert bar.display is bar_shown
            if bar_shown:
                assert bar.percentage == 1.0
            for selector in ("#run-header", "#progress-text", "#stats"):
                no_leak(str(screen.query_one(selector, Static).render()))


@pytest.mark.parametrize("on_terminal", [False, True])
def test_records_missing_their_figures_print_no_none(on_terminal):
    """A damaged or foreign event file (records with none of their fields) prints "-" and words."""
    from amptui.cli.console import ProgressPrinter

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120) if on_terminal else None
    printer = ProgressPrinter(out=out, console=console)
    bare = [{"v": 1, "kind": kind, "t": 1.0, "rank": 0}
            for kind in ("start", "scaler", "checkpoint", "epoch", "warning", "step", "end")]
    bare[5]["step"] = 3
    printer.feed(bare)
    printer.finish(None)
    text = "\n".join(screen_lines(out.getvalue()))
    no_leak(text)
    assert "total steps unknown" in text and "3 steps in -" in text
