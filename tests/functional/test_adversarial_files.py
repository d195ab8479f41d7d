"""A runs folder (and a preset) is data: issue 24's file-level findings, rerun as a hostile or an
unlucky user would, with real processes and real files. Each says one line and exits 2 (or does the
right thing), changes nothing outside the runs folder, and never hangs (every test has a timeout).

Findings here: 1 (links as lock, events.jsonl, output.log), 3 (deep nesting), 7 (FIFOs and
devices as run files), 8 (full disk, absurd or mistyped record fields, a folder where a file
belongs), 10 (umask modes, a huge description, folder names that are no run ids) and the output
hygiene (escape sequences and markup from files, unknown statuses)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.dashboard import QUICK, app_for, async_test, home_ready, until
from support.paths import FIXTURES

DEEP = "[" * 5000 + "]" * 5000
COPY = "20261124-000000-quickstart-c0de"  # where a test puts its copy of a run


@pytest.fixture(autouse=True)
def one_thread_per_trainer(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def canned(runs_dir: Path, name: str = COPY, source: str = QUICK) -> Path:
    """A copy of a finished fixture run (no trainer needed) under `name`."""
    dest = runs_dir / name
    shutil.copytree(FIXTURES / "runs" / source, dest)
    return dest


@pytest.mark.timeout(60)
@async_test
async def test_the_home_screen_lists_damaged_runs_among_the_others(runs_dir):
    shutil.copytree(FIXTURES / "runs", runs_dir)
    bad = canned(runs_dir)
    (bad / "config.toml").write_text(f"[run]\nname = \"[/]\x1b[2J\"\ndescription = {DEEP}\n")
    marked = canned(runs_dir, "20261124-000009-quickstart-mark")  # markup that would not parse, and escapes
    (marked / "config.toml").write_text((marked / "config.toml").read_text().replace(
        'name = "quickstart"', 'name = "[/]x[bold \\u001b]0;t\\u0007"', 1))
    total = len([p for p in runs_dir.iterdir()])
    app = app_for(runs_dir)
    async with app.run_test(size=(110, 34)) as pilot:
        from amptui.dashboard.widgets.runtable import RunTable

        await home_ready(pilot, rows=total)
        table = app.screen.query_one(RunTable)
        await until(pilot, lambda: table.row_count == total)
        assert table.runs[bad.name].status == "damaged"
        assert table.runs[marked.name].preset.startswith("[/]x[bold \x1b")  # kept as written, shown escaped
