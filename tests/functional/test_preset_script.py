"""A preset is amptui's trainer's config: one naming `run.script` (a file or `-m MODULE`) would have
its model, data and precision keys silently ignored, so it is refused wherever a preset is read
(run, presets show, ab, slurm, the lists) and never saved, in one line naming the file and key."""

import shlex

import pytest
from support.cli import one_clear_line
from support.dashboard import Notes, app_for, async_test, home_ready, until

from amptui.core.config import presets
from amptui.core.config import values as cfgmod
from amptui.core.config.scriptsets import check_script_sets
from amptui.core.errors import ConfigError, UserError
from amptui.core.run import runops, runs

SCRIPT_PRESET = '[run]\nscript = "train.py"\nepochs = 3\n[amp]\ndtype = "float16"\n'
MODULE_PRESET = '[run]\nscript = "-m pkg.train"\n'


def saved(name: str, text: str):
    folder = presets.saved_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(text)
    return folder / f"{name}.toml"


@pytest.mark.parametrize("text, command", [(SCRIPT_PRESET, "amptui run --script train.py"),
                                           (MODULE_PRESET, "amptui run -m pkg.train")])
def test_a_preset_file_naming_a_script_is_refused_naming_file_key_and_the_command_to_use(isolated, text, command):
    path = isolated / "mine.toml"
    path.write_text(text)
    preset = presets.find_preset(str(path))  # found: the refusal comes when it is read
    with pytest.raises(ConfigError) as refused:
        preset.config()
    message = str(refused.value)
    assert message.startswith(f"{path}: run.script = ") and "a preset names no script" in message, message
    assert f"`{command}`" in message and "\n" not in message


def test_a_saved_preset_naming_a_script_lists_as_invalid_and_will_not_load(isolated):
    saved("scripted", MODULE_PRESET)
    listed = {p.name: p for p in presets.list_presets()}
    assert listed["scripted"].description.startswith("(invalid: run.script = '-m pkg.train': a preset names no script")
    assert not [p.name for p in listed.values() if p.builtin and p.description.startswith("(invalid")]
    with pytest.raises(ConfigError, match="scripted.toml: run.script"):
        presets.find_preset("scripted").config({"run.epochs": 2})


def test_an_empty_script_is_the_trainer_and_a_wrong_type_is_the_schemas_error(isolated):
    saved("plain", '[run]\nscript = ""\nepochs = 2\n')
    assert presets.find_preset("plain").config().run.epochs == 2
    saved("typed", "[run]\nscript = 5\n")
    with pytest.raises(ConfigError) as refused:
        presets.find_preset("typed").config()
    assert "run.script must be" in str(refused.value) and "names no script" not in str(refused.value)


def test_a_config_naming_a_script_is_never_saved_as_a_preset(isolated):
    cfg = presets.find_preset("quickstart").config().with_overrides({"run.script": "train.py"})
    with pytest.raises(UserError, match=r"^preset 'mine': run.script = 'train.py': a preset names no script"):
        presets.save_preset("mine", cfg, source="quickstart")
    assert not presets.saved_dir().exists()


def test_cli_refuses_a_scripted_preset_everywhere_it_is_read(cli, isolated):
    (isolated / "s.toml").write_text(SCRIPT_PRESET)
    for args in (["presets", "show", "s.toml"], ["ab", "s.toml"], ["slurm", "s.toml"],
                 ["run", "s.toml", "--print-launch"]):
        line = one_clear_line(cli(*args))
        assert line.startswith("amptui: error: s.toml: run.script = 'train.py': a preset names no script"), (args, line)
    line = one_clear_line(cli("presets", "save", "x", "--from", "quickstart", "--set", 'run.script="train.py"'))
    assert "preset 'x': run.script = 'train.py'" in line
    assert not presets.saved_dir().exists() and not (isolated / "runs").exists()
    assert "(invalid: run.script" not in cli("presets", "list", check=True).stdout  # built-ins all load


def test_a_script_runs_equivalent_command_is_one_amptui_run_takes(isolated):
    """The dashboard's `i` on a script run: `amptui run --script FILE` with only the keys a script
    run takes (its config's amp/model keys were its loop's, and `--set run.script` is refused)."""
    cfg = cfgmod.build_config({}, {"run.script": str(isolated / "train.py"), "run.name": "recipe",
                                   "log.every": 3, "amp.autocast": False, "run.device": "cpu"})
    folder = runs.create_folder(isolated / "runs", "recipe")
    runs.write_new(folder, cfg, "# test")
    words = shlex.split(runops.equivalent_command(folder.path))
    assert words[:4] == ["amptui", "run", "--script", str(isolated / "train.py")], words
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    assert sets == ['run.name="recipe"', "log.every=3"], sets
    check_script_sets(cfgmod.parse_set(sets))  # the CLI takes it


@async_test
async def test_the_dashboard_lists_a_scripted_preset_as_invalid_and_r_starts_nothing(root, monkeypatch):
    from amptui.dashboard.widgets.toggles import TogglesPanel

    saved("scripted", SCRIPT_PRESET)
    calls: list = []
    monkeypatch.setattr("amptui.jobs.detached.subprocess.run", lambda command, **kw: calls.append(command))
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        home = await home_ready(pilot)
        home.query_one("#presets").highlighted = [p.name for p in home.presets].index("scripted")
        await until(pilot, lambda: home.preset.name == "scripted")
        await pilot.pause()
        error = str(home.query_one(TogglesPanel).query_one("#toggle-error").render())
        assert "cannot load" in error and "run.script = 'train.py'" in error, error
        assert home.preset.description.startswith("(invalid: run.script = 'train.py'")
        notes = Notes().install(app)
        await pilot.press("r")
        await pilot.pause()
        assert not calls and "cannot load" in notes.text()


@async_test
async def test_i_on_a_script_run_says_its_arguments_are_added_after_a_double_dash(root):
    from amptui.dashboard.screens.modals import RunInfoModal

    cfg = cfgmod.build_config({}, {"run.script": str(root / "train.py"), "run.name": "recipe"})
    folder = runs.create_folder(root, "recipe")
    runs.write_new(folder, cfg, "# test")
    app = app_for(root)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        app.push_screen(RunInfoModal(folder.path))
        await until(pilot, lambda: isinstance(app.screen, RunInfoModal) and app.screen.query("#info-command"))
        hint = str(app.screen.query(".hint").first().render())
        command = str(app.screen.query_one("#info-command").render())
        assert command.startswith("amptui run --script ") and "add them after --" in hint, (command, hint)
