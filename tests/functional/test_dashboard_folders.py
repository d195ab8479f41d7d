"""Runs from anywhere on the machine (every run records its runs folder in amptui's state
directory; the dashboard lists them and switches with `o`), A/B groups from the CLI shown like the
dashboard's own, and toggle edits that survive a restart."""

from __future__ import annotations

import json
import os

from support.dashboard import app_for, async_test, copy_runs, home_ready, settled, until

from amptui.core.run import folders
from amptui.core.run.runs import create_folder, launch_identity
from amptui.dashboard import toggle_edits
from amptui.dashboard.screens.folders import RunsFolderChooser
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.jobs import groups as groupmod

OLDER = "20261121-231544-quickstart-8ab8"
MIDDLE = "20261121-231557-scaler-lab-058d"


def test_every_new_run_folder_records_its_runs_folder(tmp_path):
    create_folder(tmp_path / "a", "quickstart")
    create_folder(tmp_path / "b", "quickstart")
    assert folders.used_folders() == [tmp_path / "b", tmp_path / "a"]   # most recently used first


def test_the_record_is_bounded_and_a_damaged_one_counts_as_empty(tmp_path):
    folders.record_path().parent.mkdir(parents=True, exist_ok=True)
    for damage in ("{not json", '{"format": 1, "folders": ["x"]}', '{"format": 1, "folders": {"rel": 1}}', "[]",
                   '{"format": 1, "folders": {"/x": 1%s}}' % ("0" * 400)):  # too large for a float
        folders.record_path().write_text(damage)
        assert folders.used_folders(existing=False) == []
    for i in range(folders.MAX_FOLDERS + 5):
        folders.remember(tmp_path / f"f{i}")
    kept = json.loads(folders.record_path().read_text())["folders"]
    assert len(kept) == folders.MAX_FOLDERS and os.path.realpath(tmp_path / "f0") not in kept


@async_test
async def test_o_lists_the_runs_folders_used_and_switches_to_one(root, tmp_path):
    other = copy_runs(tmp_path / "elsewhere" / "runs")
    (other / OLDER).rename(other / "20261122-101010-monitor-beef")
    folders.remember(other)
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        home = await home_ready(pilot, rows=3)
        assert "o: 1 other folder" in str(home.query_one("#home-title").render())
        home.query_one(RunTable).focus()
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, RunsFolderChooser))
        assert app.screen.choices == [root.resolve(), other]
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        table = app.screen.query_one(RunTable)
        await until(pilot, lambda: "20261122-101010-monitor-beef" in table.run_ids)
        assert app.runs_root == other.resolve()
        # the title names the folder now shown (at 80 columns by its start and its last folders)
        assert "/elsewhere/runs" in str(app.screen.query_one("#home-title").render())
        await pilot.press("o")                         # escape keeps the folder
        await until(pilot, lambda: isinstance(app.screen, RunsFolderChooser))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        assert app.runs_root == other.resolve()


@async_test
async def test_an_ab_from_the_cli_carries_its_group(root):
    # what `amptui ab` in a terminal records (jobs/ab.start_here): a group driven by its own process
    group = groupmod.create(root, "quickstart", "quickstart", {}, "fp32,bf16",
                            lambda g: launch_identity(os.getpid()))
    group.update(state="done", runs=[OLDER, MIDDLE], variants=["fp32", "bf16"])
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot, rows=3)
        table = home.query_one(RunTable)
        await until(pilot, lambda: table.groups.get(OLDER) == "ab1")
        assert table.groups.get(MIDDLE) == "ab1" and len(table.groups) == 2


@async_test
async def test_toggle_edits_survive_a_restart(root):
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        home.query_one("#t-data-batch-size").value = "16"
        home.query_one("#t-amp-autocast").value = False
        # kept on disk as they are made (messages between widgets): wait for that, not a fixed time
        await until(pilot, lambda: (toggle_edits.load().get(home.preset.name) or {}).get("data.batch_size") == "16")
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        await until(pilot, lambda: home.query_one("#t-data-batch-size").value == "16")
        assert home.query_one("#t-amp-autocast").value is False
        assert "your edits" in str(home.query_one("#preset-desc").render())
        home.query_one("#t-data-batch-size").value = "64"     # back as the preset has it: forgotten
        home.query_one("#t-amp-autocast").value = True
        await until(pilot, lambda: home.preset.name not in toggle_edits.load())
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        await settled(pilot)
        assert "your edits" not in str(home.query_one("#preset-desc").render())


def test_runs_all_folders_lists_every_folder_used(root, tmp_path, cli):
    other = copy_runs(tmp_path / "elsewhere" / "runs")
    folders.remember(other)
    listed = json.loads(cli("runs", "--all-folders", "--format", "json", "--runs-dir", str(root), check=True).stdout)
    assert {r["runs_dir"] for r in listed} == {str(root.resolve()), str(other)} and len(listed) == 6
    table = cli("runs", "--all-folders", "--runs-dir", str(root), check=True).stdout
    assert f"runs in {root.resolve()}:" in table and f"runs in {other}:" in table
