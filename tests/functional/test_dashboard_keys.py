"""The keys power users expect (issue 23): every action in the command palette with its key, `/`
filtering presets and runs, keys remapped by action name in amptui's config file (the footer and
help show the new key), themes remembered, a bad keymap refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.dashboard import QUICK, SCALER, Notes, app_for, async_test, home_ready, select_run, settled, until
from textual.app import App
from textual.command import CommandList, CommandPalette

from amptui.core import statedir, userconfig
from amptui.core.config import presets as presetmod
from amptui.dashboard.app import AmptuiApp, make_app
from amptui.dashboard.screens.help import HelpScreen, key_rows
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel


def write_settings(text: str) -> Path:
    path = userconfig.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def footer_keys(app) -> dict[str, str]:
    """action -> key, as the footer shows them now."""
    return {b.binding.action: b.binding.key for b in app.screen.active_bindings.values() if b.binding.show}


async def palette_pick(pilot, words: str) -> None:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
    palette = pilot.app.screen
    await pilot.press(*words)
    await pilot.pause()
    # the palette searches its providers in a worker: pick once that search is done (on a loaded
    # machine it can take longer than any fixed pause)
    await until(pilot, lambda: palette.query_one(CommandList).highlighted is not None
                and not any(w.node is palette and not w.is_finished for w in pilot.app.workers))
    await settled(pilot)
    await pilot.press("enter")


@async_test
async def test_palette_lists_every_action_with_its_key_and_runs_it(root):
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        commands = {c.title: c.help for c in app.get_system_commands(home)}
        for title in ("Run", "A/B", "Tune", "Watch", "Delete", "Filter", "Compare", "Info", "Keys of this screen"):
            assert title in commands, title
        assert commands["Watch"] == "key: w" and commands["Filter"] == "key: /"
        await select_run(pilot, QUICK)
        await palette_pick(pilot, "watch")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        assert app.screen.run_dir.name == QUICK


@async_test
async def test_palette_says_why_an_action_does_not_apply(root):
    app = app_for(root)
    notes = Notes()
    async with app.run_test(size=(120, 40)) as pilot:
        notes.install(app)
        await home_ready(pilot, 3)
        await palette_pick(pilot, "compare")  # nothing marked: the key would say why, and so does the palette
        await until(pilot, lambda: "mark two or more runs" in notes.text())
        assert isinstance(app.screen, HomeScreen)


@async_test
async def test_slash_filters_presets_and_runs(root):
    presetmod.save_preset("my-scaler-study", presetmod.find_preset("scaler-lab").config())
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        table = home.query_one(RunTable)
        listed = lambda: [str(o.id) for o in home.query_one("#presets").options]  # noqa: E731
        assert "quickstart" in listed() and "my-scaler-study" in listed()
        await pilot.press("slash", *"scaler")
        await until(pilot, lambda: table.run_ids == [SCALER])
        await until(pilot, lambda: "quickstart" not in listed())
        assert set(listed()) == {"scaler-lab", "my-scaler-study"}
        await pilot.press("ctrl+u", "enter")
        await until(pilot, lambda: "quickstart" in listed() and len(table.run_ids) == 3)


@async_test
async def test_a_remapped_key_runs_the_action_and_shows_in_footer_and_help(root):
    write_settings('[keymap]\n"home.watch" = "ctrl+o"\n"home.compare" = "ctrl+k"\n"app.help" = "f2"\n')
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        await select_run(pilot, QUICK)
        assert footer_keys(app)["compare"] == "ctrl+k"  # watch is in help only (the footer fits 80 columns)
        rows = {what: key for key, what, _ in key_rows(home)}
        assert rows["Watch"] == "^o" and rows["Compare"] == "^k"
        assert rows["Help"] == "f2, ?"  # ? is help's fixed second key
        await pilot.press("w")  # the old key no longer watches
        await settled(pilot)
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))


@async_test
async def test_a_remapped_key_keeps_its_reason_when_refused(root, tmp_path):
    write_settings('[keymap]\n"home.watch" = "ctrl+o"\n')
    empty = tmp_path / "empty-runs"
    empty.mkdir()
    app = app_for(empty)
    notes = Notes()
    async with app.run_test(size=(120, 40)) as pilot:
        notes.install(app)
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await pilot.press("ctrl+o")
        await until(pilot, lambda: bool(notes))
        assert "no run highlighted" in notes.text()


@async_test
async def test_the_theme_chosen_is_remembered(root):
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await home_ready(pilot, 3)
        app.theme = "nord"
        await settled(pilot)
    assert statedir.read_json(app.STATE, 4096)["theme"] == "nord"
    again = app_for(root)
    async with again.run_test(size=(120, 40)) as pilot:
        await home_ready(pilot, 3)
        assert again.theme == "nord"


@pytest.mark.parametrize("damage", ['[1, 2]', '"nord"', '7', '{"theme": ["nord"]}'])
@async_test
async def test_a_damaged_dashboard_state_file_opens_with_the_default_theme(root, damage):
    path = statedir.state_home() / AmptuiApp.STATE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(damage)
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await home_ready(pilot, 3)
        assert app.theme == App().theme


@pytest.mark.parametrize("text, says", [
    ('[keymap]\n"home.runn" = "ctrl+r"\n', "keymap.home.runn: no such action (did you mean home.run"),
    ('[keymap]\n"home.run" = 3\n', "keymap.home.run: must be a key name"),
    ('[keymap]\n"home.run" = "ctrl r"\n', "'ctrl r' is not a key name"),
    ('[keys]\n', "unknown section [keys]"),
    ('[keymap\n', "invalid TOML"),
])
def test_a_bad_keymap_is_one_line_naming_file_and_key(cli, text, says):
    path = write_settings(text)
    proc = cli("keys")
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(path) in err and says in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("text, says", [
    ('[keymap]\n"home.run" = "q"\n', "keymap.home.run: 'q' is also home.quit's key on the home screen"),
    ('[keymap]\n"run.stop" = "R"\n', "keymap.run.stop: 'R' is also run.resume's key on the run screen"),
    ('[keymap]\n"home.delete" = "f"\n', "keymap.home.delete: 'f' is also home.filter's key"),  # f: filter's alias
    ('[keymap]\n"app.help" = "q"\n', "keymap.app.help: 'q' is also home.quit's key on the home screen"),
    ('[keymap]\n"home.run" = "ctrl+p"\n', "'ctrl+p' is also the command palette's key"),
    ('[keymap]\n"home.run" = "z"\n"home.ab" = "z"\n', "'z' is also home.ab's key"),
])
def test_a_key_that_would_take_over_another_action_is_refused(cli, text, says):
    """A remap must not silently take a key another action on that screen still uses (q launching a
    run, Quit gone from the footer): one line naming the file, the key and both actions, exit 2,
    from `amptui keys` and before the dashboard opens."""
    path = write_settings(text)
    for command in (["keys"], []):
        proc = cli(*command)
        assert proc.returncode == 2 and proc.stdout == "", (command, proc.stdout)
        assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr and says in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert path.read_text() == text


def test_a_swap_of_two_keys_is_fine(cli):
    write_settings('[keymap]\n"home.run" = "q"\n"home.quit" = "r"\n')
    proc = cli("keys", "--format", "json", check=True)
    actions = {a["action"]: a["keys"] for a in json.loads(proc.stdout)["actions"]}
    assert actions["home.run"] == "q" and actions["home.quit"] == "r"
    settings = userconfig.load()
    assert make_app(settings=settings).user_keymap == settings.keymap


@async_test
async def test_help_shows_one_row_per_action_with_all_its_keys(root):
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        rows = key_rows(home)
        whats = [what for _, what, _ in rows]
        assert len(whats) == len(set(whats)), whats
        keys = {what: key for key, what, _ in rows}
        assert keys["Filter"] == "/, f" and keys["Help"] == "f1, ?"


def test_keys_lists_the_names_a_keymap_takes(cli):
    write_settings('[keymap]\n"run.stop" = "ctrl+t"\n')
    proc = cli("keys", "--format", "json", check=True)
    actions = {a["action"]: a["keys"] for a in json.loads(proc.stdout)["actions"]}
    assert actions["run.stop"] == "ctrl+t" and actions["home.filter"] == "/" and actions["compare.export_csv"] == "v"


@async_test
async def test_damaged_toggle_edits_are_left_out(root):
    """toggle-edits.json is data: a number where a text field's text belongs, a string for a
    switch, are not restored (the dashboard opened, then broke drawing the field)."""
    path = statedir.state_home() / "toggle-edits.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "presets": {p.name: {
        "data.batch_size": 5, "optim.lr": True, "amp.autocast": "yes", "amp.dtype": 7, "run.epochs": "9"}
        for p in presetmod.list_presets()}}))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        home = await home_ready(pilot, 3)
        await until(pilot, lambda: home.query_one(TogglesPanel).state()["run.epochs"] == "9")  # the good edit, restored
        state = home.query_one(TogglesPanel).state()
        assert isinstance(state["data.batch_size"], str) and isinstance(state["amp.autocast"], bool)
