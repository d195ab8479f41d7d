"""Saved presets: where they go, how they are written, and what is refused."""

import os

import pytest

from amptui.core.config import presets
from amptui.core.config import values as config
from amptui.core.errors import UserError


def test_save_writes_only_the_differences_and_loads_back_identical(isolated):
    cfg = presets.find_preset("quickstart").config({"amp.dtype": "float16", "data.batch_size": 32})
    path = presets.save_preset("mine", cfg, source="quickstart")
    assert path == isolated / "xdg" / "amptui" / "presets" / "mine.toml"
    loaded, expected = presets.find_preset("mine").config().to_dict(), cfg.to_dict()
    assert loaded["run"].pop("description") == "quickstart with data.batch_size=32, amp.dtype=float16"
    expected["run"].pop("description")
    assert loaded == expected
    assert "[model]" in path.read_text() and "seed" not in path.read_text()  # defaults are not repeated
    assert [p.name for p in presets.list_presets() if not p.builtin] == ["mine"]


def test_save_never_overwrites_without_force():
    cfg = presets.find_preset("quickstart").config()
    presets.save_preset("mine", cfg)
    before = presets.find_preset("mine").path.read_bytes()
    with pytest.raises(UserError, match="already exists.*--force"):
        presets.save_preset("mine", cfg.with_overrides({"run.epochs": 9}))
    assert presets.find_preset("mine").path.read_bytes() == before
    presets.save_preset("mine", cfg.with_overrides({"run.epochs": 9}), force=True)
    assert presets.find_preset("mine").config().run.epochs == 9


@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/b", "", ".hidden", "x" * 65])
def test_preset_names_cannot_leave_their_folder(name, isolated):
    with pytest.raises(UserError, match="preset name"):
        presets.save_preset(name, config.Config())
    assert not (isolated / "xdg").exists() or not any((isolated / "xdg").rglob("*.toml"))


def test_builtin_names_are_reserved():
    with pytest.raises(UserError, match="built in"):
        presets.save_preset("quickstart", config.Config())


def test_write_is_atomic_and_leaves_no_temp_files(isolated):
    presets.save_preset("mine", config.Config())
    folder = presets.saved_dir()
    assert sorted(os.listdir(folder)) == ["mine.toml"]


def test_presets_cli_list_show_save(cli, isolated):
    out = cli("presets", "list", check=True).stdout
    assert "quickstart" in out and "built-in" in out
    out = cli("presets", "show", "scaler-lab", check=True).stdout
    assert "growth_interval = 8" in out and "[dist]" in out  # every key resolved
    out = cli("presets", "save", "fast", "--from", "quickstart", "--set", "run.epochs=1", check=True).stdout
    assert "saved preset 'fast'" in out
    again = cli("presets", "save", "fast", "--from", "quickstart")
    assert again.returncode == 2 and "already exists" in again.stderr and "Traceback" not in again.stderr
    assert "fast" in cli("presets", "list", check=True).stdout
    assert presets.find_preset("fast").config().run.epochs == 1


def test_a_saved_preset_describes_itself_not_its_parent(cli, isolated):
    cli("presets", "save", "bf", "--from", "quickstart", "--set", "amp.dtype=bfloat16", check=True)
    cli("presets", "save", "same", "--from", "quickstart", check=True)
    cli("presets", "save", "told", "--from", "quickstart", "--set", 'run.description="my own words"',
        check=True)
    described = {p.name: p.description for p in presets.list_presets()}
    assert described["bf"] == "quickstart with amp.dtype=bfloat16"
    assert described["same"] == "copy of quickstart"
    assert described["told"] == "my own words"
    assert "quickstart with amp.dtype=bfloat16" in cli("presets", "list", check=True).stdout
