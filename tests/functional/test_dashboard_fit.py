"""The dashboard at 80x24 as values and files change: the run list's columns follow their values,
long names give way to the duration, the help overlay scrolls, presets saved or deleted by another
process come and go without a restart."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from rich.cells import cell_len
from rich.text import Text
from support.dashboard import (
    FIXTURES,
    LIVE,
    QUICK,
    Notes,
    app_for,
    async_test,
    copy_runs,
    finish_live_run,
    home_ready,
    settled,
    until,
)
from support.drawn import drawn_text

from amptui.dashboard.screens.help import HelpScreen
from amptui.dashboard.widgets.runtable import COLUMNS, RunTable

RUN_LIST_ROWS = 1  # a table line: 0 is the header


def drawn_line(table: RunTable, y: int) -> str:
    """Line y of the table as it is drawn (the Line API: what reaches the terminal)."""
    return table.render_line(y).text


def fast_run_list(monkeypatch) -> None:
    """The run list rereads its folder every 0.2 s instead of 2 s: a test of what a reread shows
    waits for one (the same timer, sooner)."""
    from amptui.dashboard.screens.home import runs

    monkeypatch.setattr(runs, "RUNS_REFRESH_S", 0.2)


def cells_of(table: RunTable, run_id: str) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(run_id)]


@async_test
async def test_the_run_list_widens_its_columns_as_a_run_goes_on(tmp_path, monkeypatch):
    fast_run_list(monkeypatch)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    shutil.copytree(FIXTURES / "live" / LIVE, root / LIVE)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    launch = json.loads((root / LIVE / "run.json").read_text())
    (root / LIVE / "run.json").write_text(json.dumps({**launch, "pid": gone.pid, "host": None}))  # its writer is gone
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot)
        table = screen.query_one(RunTable)
        first = cells_of(table, LIVE)
        assert first[3] == "killed" and first[6].startswith("120/256")
        finish_live_run(root / LIVE / "events.jsonl", 256)
        await until(pilot, lambda: cells_of(table, LIVE)[3] == "completed")
        await settled(pilot)
        now = cells_of(table, LIVE)
        for (key, _), cell in zip(COLUMNS, now, strict=True):
            assert table.columns[key].width >= cell_len(cell), (key, cell)  # type: ignore[index]
        line = drawn_line(table, RUN_LIST_ROWS)
        assert "completed" in line and "256/256 100%" in line, line


@async_test
async def test_a_long_run_name_is_cut_in_the_middle_and_the_duration_stays_at_80_columns(root):
    long_name = "quickstart-tune-8f3a2c91d0-12-with-a-much-longer-tail"
    target = root / "20261122-000000-quickstart-tune-8f3a"
    shutil.copytree(root / QUICK, target)
    config = target / "config.toml"
    config.write_text(config.read_text().replace('name = "quickstart"', f'name = "{long_name}"', 1))
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=4)
        table = screen.query_one(RunTable)
        await settled(pilot)
        row = table.run_ids.index(target.name) + RUN_LIST_ROWS
        line = drawn_line(table, row)
        assert "…" in line and line.rstrip().endswith("0:06"), line
        assert "quick" in line and "tail" in line  # both ends of the name stay readable
        assert cell_len(line) <= table.size.width
        # a wide screen gives the name its room back
        await pilot.resize_terminal(160, 40)
        await until(pilot, lambda: long_name in drawn_line(table, table.run_ids.index(target.name) + 1))


@async_test
async def test_a_long_runs_path_gives_way_in_the_middle_and_the_o_hint_stays_at_80_columns(tmp_path, monkeypatch):
    from amptui.core.run import folders

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    deep = tmp_path / "home-of-a-user" / "projects" / "a-rather-long-project-name" / "experiments" / "amp-sweep" / "runs"
    copy_runs(deep)
    for other in ("elsewhere-a", "elsewhere-b"):       # runs folders used before: `o` lists them
        (tmp_path / other).mkdir()
        folders.remember(tmp_path / other)
    app = app_for(deep)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=3)
        title = screen.query_one("#home-title")
        await settled(pilot)
        line = title.render_line(0).text.rstrip()
        assert line.endswith("· o: 2 other folders"), line       # the hint, whole, at the end of the line
        assert "…" in line and str(tmp_path)[:4] in line and "amp-sweep/runs ·" in line, line  # start and end
        assert cell_len(line) <= 80
        whole = f"amptui · mixed-precision training dashboard · runs in {deep} · o: 2 other folders"
        await pilot.resize_terminal(cell_len(whole) + 2, 40)      # room for all of it again (padding: 2)
        await until(pilot, lambda: title.render_line(0).text.strip() == whole)
        await pilot.resize_terminal(60, 24)                       # narrower still: the path gives more way
        await until(pilot, lambda: title.render_line(0).text.rstrip().endswith("/runs · o: 2 other folders"))
        assert "…" in title.render_line(0).text and cell_len(title.render_line(0).text.rstrip()) <= 60


@async_test
async def test_the_help_overlay_scrolls_at_80x24_and_says_so(root):
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await home_ready(pilot, rows=3)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await settled(pilot)
        help_screen = app.screen
        hint = help_screen.query_one("#help-hint")
        assert "more keys" in str(hint.render())
        keys = help_screen.query_one("#help-keys")
        assert keys.max_scroll_y > 0
        dialog = help_screen.query_one("#help-dialog")
        assert dialog.region.bottom <= 24  # the whole dialog, hint included, is on screen
        await pilot.press("end")
        await until(pilot, lambda: keys.scroll_y == keys.max_scroll_y)
        await settled(pilot)
        assert "▲" in str(hint.render())  # at the bottom: the hint says the rest is above


@async_test
async def test_presets_saved_and_deleted_by_another_process_come_and_go(root, monkeypatch):
    fast_run_list(monkeypatch)
    from amptui.core.config import presets as presetmod
    from amptui.dashboard.screens.home.presets import PresetList

    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=3)
        names = lambda: [o.id for o in screen.query_one(PresetList).options]  # noqa: E731
        assert "mine" not in names()
        folder = presetmod.saved_dir()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "mine.toml").write_text('description = "saved elsewhere"\n[data]\nbatch_size = 32\n')
        await until(pilot, lambda: "mine" in names())
        (folder / "mine.toml").unlink()
        await until(pilot, lambda: "mine" not in names())


@async_test
async def test_a_run_started_elsewhere_appears_in_the_run_list(root, monkeypatch):
    fast_run_list(monkeypatch)
    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await home_ready(pilot, rows=3)
        table = screen.query_one(RunTable)
        shutil.copytree(root / QUICK, root / "20261122-010101-quickstart-9c9c")
        await until(pilot, lambda: "20261122-010101-quickstart-9c9c" in table.run_ids)


# --- the tune screen ------------------------------------------------------------------------------

PRETRAINED_ERROR = ("amptui: error: model.pretrained: ImageNet weights for resnet18 are not in the torch hub "
                    "folder ~/.cache/torch/hub/checkpoints (this machine is offline); put resnet18-f37072fd.pth "
                    "there, or --set model.pretrained=false")


@async_test
async def test_t_asks_the_budget_and_a_refused_tune_shows_its_whole_error_at_80x24(root, monkeypatch):
    import subprocess

    from amptui.dashboard.screens.tune.screen import TuneScreen
    from amptui.dashboard.screens.tune.start import TuneStartModal

    seen = {}

    def fake_tune_detach(command, **kwargs):
        """`amptui tune --detach` as it answers: started; its background search then refuses (its log)."""
        seen["command"] = command
        log = root / "quickstart-tune-0001.tune.log"
        log.write_text(PRETRAINED_ERROR + "\n")
        line = {"kind": "tune", "tune_id": "quickstart-tune-0001", "pid": 1, "log": str(log),
                "result": str(root / "quickstart-tune-0001.tune.json")}
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps(line) + "\n", stderr="")

    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", fake_tune_detach)
    app = app_for(root)
    notes = Notes().install(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await home_ready(pilot, rows=3)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TuneStartModal))
        modal = app.screen
        title = " ".join(drawn_text(modal.query_one("#tune-start-title")).split())
        assert title == "Tune quickstart: the fastest setup that keeps fp32's accuracy"
        field = modal.query_one("#tune-budget")
        assert field.value == "10"  # the CLI's default
        field.value = "0"
        await settled(pilot)
        await pilot.press("enter")
        await settled(pilot)
        assert app.screen is modal and "a number > 0" in str(modal.query_one("#tune-budget-msg").render())
        field.value = "2.5"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TuneScreen))
        command = seen["command"]
        assert command[4:6] == ["tune", "quickstart"] and command[command.index("--budget") + 1] == "2.5"
        screen = app.screen
        await until(pilot, lambda: screen.error)
        await settled(pilot)
        title = drawn_text(screen.query_one("#tune-title"))
        assert title.startswith("tune quickstart") and "did not start" in title
        error = drawn_text(screen.query_one("#tune-error"))
        assert "or --set model.pretrained=false" in " ".join(error.split())  # wrapped, not cut
        assert len(error.splitlines()) >= 2
        why = " ".join(drawn_text(screen.query_one("#tune-explain")).split())
        assert "did not start" in why and "press t again" in why
        assert "tuning quickstart" not in notes.text(), "no 'tuning … for up to' for a tune that refused (issue 25)"


@async_test
async def test_the_tune_start_dialog_wraps_a_long_preset_name_at_80x24(root):
    from amptui.dashboard.screens.tune.start import TuneStartModal

    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await home_ready(pilot, rows=3)
        modal = TuneStartModal("resnet18-intel", {"run.device": "cpu"})
        app.push_screen(modal)
        await until(pilot, lambda: app.screen is modal)
        await settled(pilot)
        title = modal.query_one("#tune-start-title")
        assert title.size.height == 2  # wrapped at a word, not cut ("…keeps fp32's accurac")
        assert " ".join(drawn_text(title).split()) == "Tune resnet18-intel: the fastest setup that keeps fp32's accuracy"


@async_test
async def test_the_compare_table_drops_whole_columns_at_80_columns_loss_and_verdict_first(root):
    """At 80 columns the table fits without scrolling sideways: the terminal's short forms, the
    least wanted columns left out whole (Column.priority, as `amptui compare` does), loss and the
    speed-up first; a wider screen (resized) gets every figure back."""
    from support.dashboard import FAILED, SCALER

    from amptui.dashboard.screens.compare.screen import CompareScreen

    app = app_for(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await home_ready(pilot, rows=3)
        app.open_compare([root / QUICK, root / SCALER, root / FAILED])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.drawn())
        await pilot.pause()
        box = app.screen.query_one("#compare-table-box")
        table = app.screen.query_one("#compare-table")
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[:4] == ["#", "precision", "loss @ step 20", "speed-up"] and "val acc" in labels, labels
        assert "run" not in labels and "samples/s" not in labels  # left out whole, never cut
        assert table.max_scroll_x == 0 and not box.border_subtitle
        assert [str(c) for c in table.get_row(SCALER)][1:2] == ["fp16+scaler"]
        await pilot.resize_terminal(200, 40)
        await until(pilot, lambda: "samples/s" in [str(c.label) for c in table.columns.values()])
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[-3:] == ["samples/s", "skipped", "data wait"] and "final loss" in labels  # every figure back


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@async_test
async def test_compare_shows_the_fp32_baselines_tf32_and_each_runs_narrowest_headroom(root, size):
    """An fp32 baseline on an A100 (numerics off) against float16 with range samples: under the
    table, the baseline's TF32 and one headroom line per run in `amptui compare`'s words, with the
    loss plots still on screen; the markdown export carries the same notes."""
    from support.pictures import write_headroom_pair

    from amptui.dashboard.screens.compare.screen import CompareScreen

    baseline, sampled = write_headroom_pair(root)
    app = app_for(root)
    async with app.run_test(size=size) as pilot:
        await home_ready(pilot, rows=3)
        app.open_compare([baseline, sampled])
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.drawn())
        await settled(pilot)
        screen = app.screen
        assert not screen.query_one("#compare-warning").display  # numerics.every is measuring, not training
        notes = screen.query_one("#compare-notes")
        lines = drawn_text(notes).splitlines()
        assert lines[-2:] == ["narrowest range headroom 1: not sampled (numerics off)",
                              "                         2: 2.3 bits to float16 max in classifier.1"]
        said = " ".join(line.strip() for line in lines[:-2])
        assert said.startswith("fp32 baseline run 1: TF32 matmuls off, TF32 cuDNN convolutions on (its float32 "
                               "ran partly on TF32 tensor cores)"), said
        assert "None" not in drawn_text(notes) and "?" not in drawn_text(notes)
        plot = screen.query_one("#compare-plot-box")
        assert notes.region.bottom <= plot.region.y and plot.region.height >= 8  # the curves keep their room
        assert plot.region.bottom <= size[1] - 1  # above the footer
        markdown = screen.table_text("markdown")
        assert f"fp32 baseline {baseline.name}: TF32 matmuls off" in markdown
        assert (f"narrowest range headroom: {sampled.name} (fp16+scaler): 2.3 bits to float16 max in classifier.1"
                in markdown)


@async_test
async def test_the_toggle_values_stay_in_sight_at_60x20(root):
    """Issue 51 (small): at 60x20 the toggles' values were squeezed to no columns at all; a narrow panel
    now puts one label and value on a row, each value wide enough to read, all on the screen."""
    from textual.widgets import Input, Select, Switch

    from amptui.dashboard.widgets.toggles import TogglesPanel

    for size, narrow in (((60, 20), True), ((80, 24), False)):
        app = app_for(root)
        async with app.run_test(size=size) as pilot:
            screen = await home_ready(pilot)
            await settled(pilot)
            panel = screen.query_one(TogglesPanel)
            assert panel.query_one("#toggle-grid").has_class("narrow") is narrow
            values = [w for w in panel.query("Switch, Select, Input") if isinstance(w, (Switch, Select, Input))]
            assert len(values) >= 10
            for w in values:
                region = w.region
                assert region.width >= 4 and region.height == 1, (size, w.id, region)
                assert region.right <= size[0] and region.bottom <= size[1], (size, w.id, region)
