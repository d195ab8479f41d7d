"""`amptui tune`: real trials through the normal trainer (tiny models, few steps), the accuracy
guard, the out-of-memory path, the tuned preset, Ctrl-C, and the dashboard's tune screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tune_presets import tiny_preset

from amptui.core.config import presets as presetmod
from amptui.core.errors import UserError
from amptui.tune import plan as T
from amptui.tune import report


def test_the_report_of_a_stopped_tune_shows_no_winner_even_from_an_older_result(tmp_path):
    """What the CLI and the dashboard both read (tune/report.py): a result an older amptui wrote for
    the reviewer's stop (status interrupted, yet winner fp32 and a WINNER row) names no winner."""
    from support.tune import finished_search, write_old_stopped_tune, write_tune

    old = T.read_result(write_old_stopped_tune(tmp_path))
    assert T.winner_of(old) is None and report.save_hint(old, "s") == ""
    assert report.status_words(old) == "stopped: partial result, no winner"
    assert [cells[-1] for cells, _ in report.rows(old)][0] == "fp32 reference"
    assert not any("WINNER" in line for line in report.lines(old))
    with pytest.raises(UserError, match="no winner to save"):
        T.save_winner(old)
    new = T.read_result(write_tune(tmp_path, finished_search(), interrupted=False, tid="t-done"))
    assert T.winner_of(new) == "bf16" and report.status_words(new) == "done"
    assert report.save_hint(new, "s") == "s saves the winner as preset quickstart-tuned."
    assert [(cells[0], style) for cells, style in report.rows(new) if cells[-1] == "WINNER"] == [("bf16", "bold green")]


def test_bad_keys_are_one_line_errors(cli, tmp_path):
    preset = tiny_preset(tmp_path)
    proc = cli("tune", str(preset), "--keys", "optim.fused")
    assert proc.returncode == 2 and "not a preset key; the fused optimizer is always on where supported" in proc.stderr
    proc = cli("tune", str(preset), "--set", "amp.dtype=bfloat16")
    assert proc.returncode == 2 and "tune searches that" in proc.stderr
    assert "Traceback" not in proc.stderr and not Path("runs").exists()


# --- the dashboard ------------------------------------------------------------------------------------

def drawn(widget) -> str:
    """A widget's lines as the terminal shows them, joined into one line of words."""
    return " ".join(" ".join(widget.render_line(y).text.split()) for y in range(widget.size.height))


async def open_tune(pilot, path: Path, announce: bool = False):
    from support.dashboard import home_ready, settled, until

    from amptui.dashboard.screens.tune.screen import TuneScreen

    await home_ready(pilot, rows=3)
    screen = TuneScreen(path, None, "quickstart", announce=announce)
    pilot.app.push_screen(screen)
    await until(pilot, lambda: screen.result is not None)
    await settled(pilot)
    return screen


def table_text(screen) -> str:
    from textual.widgets import DataTable

    table = screen.query_one("#tune-table", DataTable)
    return " | ".join(str(cell) for row in range(table.row_count) for cell in table.get_row_at(row))


def test_the_tune_screen_of_a_stopped_search_names_no_winner_and_offers_no_save(root):
    """Issue 25: after q the screen said "stopped (partial result)" beside "WINNER (stay in fp32)" and
    "s saves the winner". Both the result this amptui writes and the one an older one wrote."""
    from support.dashboard import Notes, app_for, async_test, until
    from support.tune import reviewers_stop, write_old_stopped_tune, write_tune

    @async_test
    async def check(path: Path) -> tuple[str, str]:
        app = app_for(root)
        notes = Notes().install(app)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_tune(pilot, path)
            assert "WINNER" not in table_text(screen) and "fp32 reference" in table_text(screen)
            assert "1.00x" in table_text(screen)  # fp32 against itself
            title, why = drawn(screen.query_one("#tune-title")), drawn(screen.query_one("#tune-explain"))
            assert title.startswith("tune quickstart · stopped: partial result, no winner"), title
            assert "s saves" not in why and "WINNER" not in why
            assert screen.check_action("save_winner", ()) is False  # the footer hides s
            await pilot.press("s")
            await until(pilot, lambda: "no winner to save" in notes.text())
            assert not presetmod.saved_dir().joinpath("quickstart-tuned.toml").exists()
            return why, str(screen.query_one("#tune-explain-box").border_subtitle)

    why, hint = check(write_tune(root, reviewers_stop(), interrupted=True))
    assert hint.startswith("more below")  # the Why panel scrolls at 80x24, and says so
    assert why.startswith("Not enough trials to recommend: the search was stopped before it measured fp16+scaler")
    assert "bf16 951.3 ms/step" in why and "accuracy check did not finish" in why
    why, _ = check(write_old_stopped_tune(root, tid="20261124-090000-quickstart-tune-0ld1"))
    assert "The search was stopped before it ended: partial result, no winner" in why


def test_the_tune_screen_of_a_finished_search_announces_it_and_saves_the_winner(root):
    from support.dashboard import Notes, app_for, async_test, until
    from support.tune import finished_search, write_tune

    @async_test
    async def check() -> None:
        app = app_for(root)
        notes = Notes().install(app)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_tune(pilot, write_tune(root, finished_search(), interrupted=False), announce=True)
            assert "tuning quickstart for up to 10 min" in notes.text()  # once the search is under way
            assert "bf16 | 60.0 | 1067 | 310.0 MiB | 2.00x | WINNER" in table_text(screen)
            assert "s saves the winner as preset quickstart-tuned." in drawn(screen.query_one("#tune-explain"))
            await pilot.press("s")
            await until(pilot, lambda: presetmod.saved_dir().joinpath("quickstart-tuned.toml").exists())

    check()
    assert presetmod.find_preset("quickstart-tuned").config().amp.dtype == "bfloat16"
