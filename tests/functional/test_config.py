"""The preset schema: defaults, validation, `--set` parsing and the built-in presets."""


import pytest
from support.paths import FIXTURES

from amptui.core.config.presets import find_preset
from amptui.core.errors import ConfigError


@pytest.mark.parametrize("fixture, words", [
    ("bad_syntax.toml", r"bad_syntax.toml: invalid TOML: .*line 3"),
    ("unknown_key.toml", r"unknown_key.toml: unknown key 'amp.autocastt'; did you mean amp.autocast\?"),
    ("unknown_section.toml", r"unknown_section.toml: unknown section \[training\]"),
    ("wrong_type.toml", r"wrong_type.toml: data.batch_size must be an integer, got 'sixty-four'"),
    ("bad_choice.toml", r"bad_choice.toml: amp.dtype must be one of"),
    ("section_not_table.toml", r"section_not_table.toml: amp must be a table"),
    ("below_minimum.toml", r"below_minimum.toml: run.epochs must be >= 1"),
    ("bad_combination.toml", r"bad_combination.toml: data.name = \"random\""),
])
def test_malformed_presets_get_one_clear_message(fixture, words):
    preset = find_preset(str(FIXTURES / "presets" / fixture))
    with pytest.raises(ConfigError, match=words):
        preset.config()


def test_set_init_scale_zero_on_the_command_line_names_set(cli):
    proc = cli("run", "quickstart", "--set", "amp.init_scale=0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "amptui: error: --set: amp.init_scale must be > 0, got 0.0", proc.stderr
