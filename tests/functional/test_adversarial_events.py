"""events.jsonl as a hostile or unlucky folder holds it (issue 24 finding 7, issue 27): a FIFO, a
link to /dev/zero, a 50 MB torn line. Nothing hangs (every test under a timeout), memory stays
bounded, and the run shows as damaged or counts the line as bad."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tracemalloc
from pathlib import Path

import pytest
from support.dashboard import FIXTURES, QUICK, app_for, async_test, until

from amptui.core.stream.events import EventWriter

# What the run screen's reader may hold while it reads a 50 MB torn line: the chunk being read
# (8 MiB while a big history is skimmed, 1 MiB after) plus at most MAX_LINE_BYTES (4 MiB) of a torn
# line; never the line itself. Measured: 8.0 MiB peak (tracemalloc).
RUN_SCREEN_BOUND = 16 * 1024 * 1024


def _run(root: Path, name: str) -> Path:
    run = root / f"20990101-000000-{name}"
    shutil.copytree(FIXTURES / "runs" / QUICK, run)
    return run


@pytest.fixture
def hostile_root(tmp_path) -> Path:
    """A runs folder with one good run, one whose events.jsonl is a FIFO, one linked to /dev/zero."""
    root = tmp_path / "hostile"
    _run(root, "good")
    fifo = _run(root, "fifo") / "events.jsonl"
    fifo.unlink()
    os.mkfifo(fifo)
    zero = _run(root, "zero") / "events.jsonl"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    return root


@pytest.mark.timeout(30)
def test_runs_list_shows_fifo_and_dev_zero_events_as_damaged(hostile_root):
    from amptui.core.run.runs import list_runs

    infos = {info.run_id.rsplit("-", 1)[1]: info for info in list_runs(hostile_root)}
    assert infos["good"].status == "completed" and not infos["good"].error
    assert infos["fifo"].status == "damaged" and "not a regular file" in infos["fifo"].error
    assert infos["zero"].status == "damaged" and "symbolic link" in infos["zero"].error


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name,why", [("fifo", "not a regular file"), ("zero", "symbolic link")])
def test_run_screen_reader_says_damaged_without_waiting(hostile_root, name, why):
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.runtail import RunTail

    run = hostile_root / f"20990101-000000-{name}"
    model = RunModel(run.name)
    tail = RunTail(run, model, alive=lambda info: False)
    tail.prefill()
    for _ in range(5):
        tail.poll()
    assert why in model.damaged and model.records == 0


@pytest.mark.timeout(60)
@async_test
async def test_watching_a_fifo_run_shows_it_damaged(hostile_root):
    app = app_for(hostile_root, watch=hostile_root / "20990101-000000-fifo")
    async with app.run_test(size=(110, 34)) as pilot:
        panel = app.screen.query_one("#error-panel")
        await until(pilot, lambda: panel.display and "damaged" in str(panel.render()))
        assert "not a regular file" in str(panel.render())


def _live_run_with_torn_line(root: Path, size: int) -> Path:
    run = _run(root, "torn")
    events = run / "events.jsonl"
    events.unlink()
    with EventWriter(events) as writer:
        writer.emit("start", total_steps=100)
        for step in range(1, 11):
            writer.emit("step", step=step, loss=1.0 / step)
    with open(events, "ab") as fh:  # the writer died (or is still writing) mid-line: no newline
        fh.write(b'{"kind":"step","step":11,"pad":"')
        block = b"x" * (1024 * 1024)
        for _ in range(size // len(block)):
            fh.write(block)
    return run


@pytest.mark.timeout(120)
def test_a_50mb_torn_line_keeps_the_run_screen_bounded_and_counts_one_bad_line(tmp_path):
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.runtail import RunTail

    run = _live_run_with_torn_line(tmp_path / "runs", 50 * 1024 * 1024)
    model = RunModel(run.name)
    tail = RunTail(run, model, alive=lambda info: True)
    tracemalloc.start()
    try:
        for _ in range(200):  # what the run screen's worker does: poll until caught up
            if not tail.poll():
                break
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < RUN_SCREEN_BOUND, f"peak {peak / 2**20:.1f} MiB"
    assert model.run.step == 10 and model.bad_lines == 1 and not model.loading
    # The line ends at last and the run goes on: read on, the bad line counted once.
    with open(run / "events.jsonl", "ab") as fh:
        fh.write(b'"}\n' + json.dumps({"kind": "end", "status": "completed", "steps": 12}).encode() + b"\n")
    for _ in range(200):
        if not tail.poll():
            break
    assert model.run.end is not None and model.bad_lines == 1


# --- issue 32 finding 6: config.toml that is not a regular file ----------------------------------------

def _config_not_a_file(root: Path, kind: str) -> Path:
    run = _run(root, f"config{kind}")
    config = run / "config.toml"
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "zero":
        config.symlink_to("/dev/zero")
    else:
        try:
            os.mknod(config, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's own device numbers
        except PermissionError:
            pytest.skip("mknod is not permitted here")
    return run


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "zero", "device"])
def test_a_config_toml_that_is_not_a_file_lists_damaged_and_can_be_deleted(tmp_path, cli, kind):
    from amptui.core.run.runs import list_runs

    root = tmp_path / "runs"
    good = _run(root, "good")
    run = _config_not_a_file(root, kind)
    infos = {info.run_id: info for info in list_runs(root)}  # under the timeout: nothing opened a FIFO
    assert infos[run.name].status == "damaged" and "config.toml" in infos[run.name].error
    assert infos[good.name].status == "completed"
    proc = cli("runs", "delete", run.name, "--yes", "--runs-dir", str(root))
    assert proc.returncode == 0 and proc.stdout.strip() == f"deleted run {run.name}", (proc.stdout, proc.stderr)
    assert not run.exists() and good.is_dir()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["fifo", "zero"])
def test_watch_svg_of_a_damaged_run_says_damaged_without_waiting_out_its_deadline(hostile_root, name):
    """Issue 32 finding 10: the picture waited its whole deadline (30 s) for records that never come."""
    from amptui.dashboard.app import headless_svg
    from amptui.dashboard.screens.run.screen import RunScreen

    run = hostile_root / f"20990101-000000-{name}"
    svg = headless_svg(lambda: RunScreen(run, standalone=True), hostile_root, (120, 40), timeout_s=600)
    assert "damaged" in svg and "killed" not in svg
