"""[amp.layers]: per-module precision. The table checked with one clear line naming the key; the
rules matched first-wins on `named_modules()` names, inherited by children; the trainer's autocast
per module (an fp32 layer computes in float32 inside a bf16 run), float8 per layer with its own
recipe, the numerics measured to each layer's own dtype; and, in a real process, a preset that
trains two layers in float8 rowwise and the rest in bf16, its start record and `compare` saying so."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.records import events, only_run

# --- a real run -------------------------------------------------------------------------------------

TINY = ["--set", "model.n_layer=2", "--set", "model.block_size=32", "--set", "data.batch_size=8",
        "--set", "data.train_samples=96", "--set", "data.val_samples=16", "--set", "run.epochs=1",
        "--set", "run.max_steps=6", "--set", "log.every=3", "--set", "numerics.every=3",
        "--set", "log.checkpoint_every=0", "--set", "amp.dtype=bfloat16"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_preset_with_amp_layers_trains_two_layers_in_float8_rowwise_and_says_so(runs_dir, tmp_path):
    preset = tmp_path / "mixed.toml"
    preset.write_text('[model]\nname = "gpt"\n[data]\nname = "text"\n'
                      '[amp.layers]\n"blocks.*.mlp.fc" = "fp8-rowwise"\n')
    proc = amptui("run", str(preset), *TINY, timeout=840)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = only_run(runs_dir)
    recs = events(run_dir)
    said = recs[0]["precision"]
    assert said["short"] == "bf16 + 2 float8 rowwise layers"
    assert said["layers"]["rules"] == [["blocks.*.mlp.fc", "fp8-rowwise"]]
    modules = said["layers"]["modules"]
    assert {n for n, v in modules.items() if v == "fp8-rowwise"} == {"blocks.0.mlp.fc", "blocks.1.mlp.fc"}
    assert {v for n, v in modules.items() if not n.endswith("mlp.fc")} == {"bf16"}
    assert said["float8"]["layers"] == ["blocks.0.mlp.fc", "blocks.1.mlp.fc"] and said["float8"]["emulated"]
    assert [r["step"] for r in recs if r["kind"] == "step"][-1] == 6
    samples = [r for r in recs if r["kind"] == "numerics"]
    assert samples and {x["name"] for x in samples[-1]["float8"]} == {"blocks.0.mlp.fc", "blocks.1.mlp.fc"}
    table = amptui("compare", run_dir.name, "--runs-dir", str(runs_dir), check=True).stdout
    assert "bf16 + 2 float8 rowwise layers" in " ".join(table.split())
    listed = amptui("runs", "--runs-dir", str(runs_dir), "--format", "json", check=True).stdout
    assert "bf16 + 2 float8 rowwise layers" in listed
