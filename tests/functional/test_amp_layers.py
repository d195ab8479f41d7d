"""[amp.layers]: per-module precision. The table checked with one clear line naming the key; the
rules matched first-wins on `named_modules()` names, inherited by children; the trainer's autocast
per module (an fp32 layer computes in float32 inside a bf16 run), float8 per layer with its own
recipe, the numerics measured to each layer's own dtype; and, in a real process, a preset that
trains two layers in float8 rowwise and the rest in bf16, its start record and `compare` saying so."""

from __future__ import annotations

import pytest
from support.cli import one_clear_line


def test_a_preset_file_with_a_bad_rule_is_refused_in_one_line_with_nothing_made(cli, runs_dir, tmp_path):
    preset = tmp_path / "mixed.toml"
    preset.write_text('[amp.layers]\n"blocks.*.mlp.fc" = "fp7"\n')
    line = one_clear_line(cli("run", str(preset)))
    assert 'amp.layers."blocks.*.mlp.fc" = \'fp7\'' in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


# --- issue 50 (Low): refused as config errors, at once, in a short line -----------------------------------

@pytest.mark.parametrize("command", [["run", "mlp-recipe", "--set", 'amp.layers={"nomatch*" = "bf16"}'],
                                     ["plan", "mlp-recipe", "--for", "H100", "--set", 'amp.layers={"nomatch*" = "bf16"}'],
                                     ["ab", "mlp-recipe", "--variants", "bf16,plan:typo"]])
def test_a_pattern_that_matches_no_module_is_a_refused_config_and_nothing_is_made(cli, runs_dir, isolated, command):
    """It used to start the run, which failed with exit 1; now the config is refused (exit 2) before
    any run folder or A/B group exists, naming the pattern and the model's modules."""
    saved = isolated / "xdg" / "amptui" / "presets" / "typo.toml"  # a plan whose rule names no module
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text('[run]\nname = "typo"\n[model]\nname = "mlp"\n[data]\nname = "random"\n[amp.layers]\n"nomatch*" = "bf16"\n')
    done = cli(*command)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = one_clear_line(done)
    assert "amp.layers: 'nomatch*' matches no module of this model (Sequential: 0, 1, 2" in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


@pytest.mark.timeout(60)  # 100,000 rules or a 3000-character pattern took 47 s and a 1.6 MB line
@pytest.mark.parametrize("table, words", [
    ({f"blocks.{i}.fc": "bf16" for i in range(100_000)}, "has 100,000 rules, more than 512"),
    ({"x" * 3000: "bf16"}, "a pattern of 3,000 characters; at most 256"),
])
def test_a_huge_table_or_pattern_is_refused_at_once_in_a_short_line(tmp_path, cli, table, words):
    preset = tmp_path / "huge.toml"
    preset.write_text("[model]\nname = \"mlp\"\n[amp.layers]\n"
                      + "".join(f'"{pattern}" = "{variant}"\n' for pattern, variant in table.items()))
    line = one_clear_line(cli("run", str(preset)))
    assert words in line and len(line) < 400, line
