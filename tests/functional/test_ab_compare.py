"""A/B experiments and the compare table: variant expansion, the table's arithmetic on canned
event files, the four formats, TensorBoard export, and real short A/B runs."""

import csv
import io
import json

import pytest
from support.canned import canned_run

from amptui.core.comparison import compare, comparenotes, runsummary
from amptui.core.config import values as cfgmod
from amptui.core.config import variants as ab
from amptui.core.errors import UserError
from amptui.core.run import runs
from amptui.core.stream.events import EventWriter


def test_variant_expansion_and_defaults():
    assert [n for n, _ in ab.expand(None, "cuda")] == ["fp32", "fp16", "fp16+scaler"]
    assert [n for n, _ in ab.expand(None, "cpu")] == ["fp32", "bf16"]
    got = dict(ab.expand("fp32, bf16+scaler", "cpu"))
    assert got["fp32"] == {"amp.autocast": False, "amp.grad_scaler": False}
    assert got["bf16+scaler"] == {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": True}
    with pytest.raises(UserError, match="unknown fp4"):  # (fp8 is torchao's float8: tests/unit/test_float8.py)
        ab.expand("fp32,fp4", "cpu")
    with pytest.raises(UserError, match="each variant once"):
        ab.expand("fp32,fp32", "cpu")
    with pytest.raises(UserError, match="choose them with --variants"):
        ab.check_overrides({"amp.dtype": "float16"})


def test_table_arithmetic_on_canned_runs(tmp_path):
    base = canned_run(tmp_path, "a", ms_per_step=20.0, batch=64, peak=1000 * 2**20, acc=0.90)
    fast = canned_run(tmp_path, "b", ms_per_step=8.0, batch=64, peak=600 * 2**20, acc=0.91, precision="bf16")
    rows = compare.compare_rows([runsummary.summarize(base), runsummary.summarize(fast)])
    assert rows[0].speedup == pytest.approx(1.0) and rows[0].memory_saving == pytest.approx(0.0)
    assert rows[1].samples_per_s == pytest.approx(64 / 0.008)
    assert rows[1].speedup == pytest.approx(20.0 / 8.0), "warm-up window left out"
    assert rows[1].memory_saving == pytest.approx(0.4)
    assert rows[1].val_acc_delta == pytest.approx(0.01)
    assert rows[1].skipped == 1 and rows[1].total_time_s == pytest.approx(0.8 + 3.0)


def test_a_resumed_run_counts_all_its_sessions_and_whole_epochs_only(tmp_path):
    run = tmp_path / "resumed"
    run.mkdir()
    with EventWriter(run / "events.jsonl") as w:  # a session of 15 s, a day's pause, one of 8 s
        w.emit("start", total_steps=20, t=1000.0)
        w.emit("epoch", epoch=1, epoch_time_s=10.0, t=1011.0)
        w.emit("epoch", epoch=2, epoch_time_s=3.0, partial=True, t=1014.0)  # a partial epoch before a stop
        w.emit("end", status="stopped", steps=12, total_time_s=16.0, peak_mem=900.0, t=1015.0)
        w.emit("start", total_steps=20, resumed_from=12, t=87400.0)
        w.emit("epoch", epoch=2, epoch_time_s=6.0, partial=True, t=87407.0)  # resumed mid-epoch
        w.emit("end", status="completed", steps=20, total_time_s=9.0, peak_mem=700.0, t=87408.0)
    summary = runsummary.summarize(run)
    assert summary.total_time_s == pytest.approx(23.0)  # the sessions' time (runs.RunClock), not the pause
    assert summary.peak_mem == 900.0 and summary.status == "completed"
    assert summary.time_per_epoch_s == pytest.approx(10.0)


def test_compare_cli_in_four_formats(cli, runs_dir):
    canned_run(runs_dir, "a", 20.0, 64, 2**30, 0.9)
    canned_run(runs_dir, "b", 10.0, 64, 2**29, 0.9)
    table = cli("compare", "a", "b", check=True).stdout
    assert "2.00x" in table and "+50.0%" in table and "steady-state" in table
    md = cli("compare", "a", "b", "--format", "markdown", check=True).stdout.splitlines()
    assert md[0].startswith("| run |") and md[1].startswith("|---") and md[3].startswith("| b |")
    rows = list(csv.DictReader(io.StringIO(cli("compare", "a", "b", "--format", "csv", check=True).stdout)))
    assert [r["run_id"] for r in rows] == ["a", "b"] and float(rows[1]["speedup"]) == pytest.approx(2.0)
    data = json.loads(cli("compare", "a", "b", "--format", "json", check=True).stdout)
    assert data[1]["memory_saving"] == pytest.approx(0.5)
    bad = cli("compare", "a", "../b")
    assert bad.returncode == 2 and "not a run id" in bad.stderr


def test_compare_table_has_a_preset_column_and_one_style_for_figures(cli, runs_dir):
    canned_run(runs_dir, "a", 20.0, 64, 2**30, 0.6992)
    out = cli("compare", "a", check=True).stdout
    header, row = out.splitlines()[:2]
    assert header.split()[:3] == ["run", "preset", "precision"] and row.split()[1] == "canned"
    assert "69.92%" in row and "0:05.0" in row and " s " not in row  # m:ss everywhere, accuracy in %
    md = cli("compare", "a", "--format", "markdown", check=True).stdout.splitlines()
    assert md[0].startswith("| run | preset | precision |")


def test_compare_warns_when_runs_differ_in_more_than_precision(cli, runs_dir):
    quick = '[run]\nname = "quickstart"\n'
    canned_run(runs_dir, "fp32", 20.0, 64, 2**30, 0.9, preset="quickstart", config=quick)
    canned_run(runs_dir, "bf16", 10.0, 64, 2**29, 0.9, preset="quickstart", precision="autocast bfloat16",
               config=quick + '[amp]\ndtype = "bfloat16"\n')
    canned_run(runs_dir, "big", 10.0, 64, 2**29, 0.9, preset="quickstart",
               config=quick + '[data]\nbatch_size = 256\n')
    canned_run(runs_dir, "other", 10.0, 64, 2**29, 0.9, preset="scaler-lab",
               config='[run]\nname = "scaler-lab"\n[model]\nwidth = 8\n')
    same = cli("compare", "fp32", "bf16", check=True)
    assert "warning" not in same.stdout + same.stderr, "an A/B differs in precision only"
    canned_run(runs_dir, "piloted", 10.0, 64, 2**29, 0.9, preset="quickstart", precision="autocast bfloat16",
               config=quick + '[amp]\ndtype = "bfloat16"\n[amp.autopilot]\nmode = "act"\n')
    piloted = cli("compare", "fp32", "piloted", check=True)
    assert "warning" not in piloted.stdout + piloted.stderr, "the autopilot is a precision policy, not another experiment"
    assert "2.00x" in same.stdout
    bigger = cli("compare", "fp32", "big", check=True).stdout
    assert "warning: these runs differ in more than precision: data.batch_size (64 / 256)" in bigger
    assert "2.00x" in bigger, "the speed-up is still shown"
    other = cli("compare", "fp32", "other", check=True).stdout
    assert "warning: different presets (quickstart, scaler-lab)" in other and "model.width (32 / 8)" in other
    as_json = cli("compare", "fp32", "other", "--format", "json", check=True)
    assert json.loads(as_json.stdout)[1]["preset"] == "scaler-lab"  # stdout stays pure json
    assert "different presets" in as_json.stderr


def script_config(**sets) -> str:
    """A script run's config.toml as its hooks write it (core/config/scriptview.py: no [model] or
    [data], the GradScaler's settings only when it had one), for a loop that showed `sets`."""
    cfg = cfgmod.build_config({}, {"run.script": "/home/me/recipe.py", "run.name": "recipe", "run.device": "cpu",
                                   **sets})
    return runs.config_text(cfg, "# a script, as its hooks saw it")


PRESET_CONFIG = '[run]\nname = "canned"\ndevice = "cpu"\n[amp]\nautocast = false\ngrad_scaler = false\n'  # fp32, resolved


def test_compare_of_a_script_run_beside_preset_runs_counts_only_what_the_script_said(cli, runs_dir):
    """The script's config.toml has no model, data, optimizer or schedule: the defaults that fill
    them when read are no difference, nor is a GradScaler setting of a run that had no scaler.
    What both hold and differ in is still said (the script's file; the record interval, which is
    measuring; dist.* are how it ran), the script by its file name."""
    canned_run(runs_dir, "fp32", 20.0, 64, 2**30, 0.9, config=PRESET_CONFIG)
    canned_run(runs_dir, "fp16", 10.0, 64, 2**29, 0.9, precision="fp16+scaler", preset="recipe",
               config=script_config(**{"amp.dtype": "float16", "amp.grad_scaler": True, "amp.init_scale": 2.0 ** 24}))
    canned_run(runs_dir, "bf16", 12.0, 64, 2**29, 0.9, precision="bf16", preset="recipe",
               config=script_config(**{"amp.dtype": "bfloat16", "amp.grad_scaler": False, "log.every": 5}))
    canned_run(runs_dir, "ddp", 12.0, 64, 2**29, 0.9, precision="bf16", preset="recipe",
               config=script_config(**{"amp.dtype": "bfloat16", "amp.grad_scaler": False, "dist.mode": "ddp",
                                       "dist.nproc_per_node": 2}))
    beside = cli("compare", "fp32", "fp16", check=True).stdout
    assert "warning: these runs differ in more than precision: run.script (- / recipe.py)\n" in beside, beside
    two = cli("compare", "fp16", "bf16", check=True).stdout
    assert "warning: these runs differ in more than precision: log.every (10 / 5)\n" in two, two
    spread = cli("compare", "bf16", "ddp", "fp32", check=True).stdout
    assert "differ in more than precision: dist.mode (none / ddp / none), dist.nproc_per_node (1 / 2 / 1), " \
           "log.every (5 / 10 / 10), run.script (recipe.py / recipe.py / -)\n" in spread, spread
    canned_run(runs_dir, "preset-fp16", 10.0, 64, 2**29, 0.9, precision="fp16+scaler",
               config=PRESET_CONFIG.replace("false", "true") + 'dtype = "float16"\n')
    scalers = cli("compare", "preset-fp16", "fp16", check=True).stdout  # both had one: their settings count
    assert "differ in more than precision: amp.init_scale (65536 / 1.67772e+07), run.script (- / recipe.py)\n" \
        in scalers, scalers
    summaries = [runsummary.summarize(runs_dir / name) for name in ("fp32", "fp16", "bf16")]
    differ = comparenotes.differing_keys(summaries)
    assert set(differ) == {"log.every", "run.script"} and differ["log.every"] == [10, 10, 5], differ


def test_compare_of_a_plan_ab_does_not_call_amp_layers_a_difference(cli, runs_dir):
    """`ab PRESET --variants bf16,plan:NAME`: the plan's [amp.layers] is its precision, what the A/B
    varies on purpose; anything else that differs is still said."""
    canned_run(runs_dir, "bf16", 12.0, 64, 2**29, 0.9, precision="bf16",
               config=PRESET_CONFIG.replace("autocast = false", "autocast = true"))
    planned = PRESET_CONFIG.replace("autocast = false", "autocast = true") + '[amp.layers]\nhidden = "fp8-rowwise"\n'
    canned_run(runs_dir, "plan", 10.0, 64, 2**29, 0.9, precision="bf16", config=planned)
    out = cli("compare", "bf16", "plan", check=True).stdout
    assert "differ in more than precision" not in out, out
    canned_run(runs_dir, "plan-log", 10.0, 64, 2**29, 0.9, precision="bf16",
               config=planned.replace("[amp.layers]", "[log]\nevery = 5\n[amp.layers]"))
    out = cli("compare", "bf16", "plan-log", check=True).stdout
    assert "warning: these runs differ in more than precision: log.every (10 / 5)\n" in out, out


def test_compare_of_trials_of_one_tune_does_not_warn_about_presets(cli, runs_dir):
    """Each trial of a tune is named '<preset>-tune-<hex>-<k>': they share the tuned preset (issue 25)."""
    for k, (name, dtype) in enumerate((("t-fp32", "float32"), ("t-bf16", "bfloat16"), ("t-fp16", "float16")), 1):
        config = f'[run]\nname = "quickstart-tune-aaf2-{k}"\n' + (f'[amp]\ndtype = "{dtype}"\n' if k > 1 else "")
        canned_run(runs_dir, name, 20.0 / k, 64, 2**30, 0.9, preset=f"quickstart-tune-aaf2-{k}", config=config)
    canned_run(runs_dir, "lab", 10.0, 64, 2**29, 0.9, preset="scaler-lab", config='[run]\nname = "scaler-lab"\n')
    trials = cli("compare", "t-fp32", "t-bf16", "t-fp16", check=True)
    assert "warning" not in trials.stdout + trials.stderr, "trials of one tune differ in precision only"
    assert "quickstart-tune-aaf2-2" in trials.stdout  # the table still names each trial
    other = cli("compare", "t-fp32", "lab", check=True).stdout
    assert "warning: different presets (quickstart, scaler-lab)" in other


def test_tensorboard_missing_is_explained(monkeypatch):
    import sys

    from amptui.core.config import values as config
    from amptui.core.prepare import preflight

    # Stand-in for a machine without the optional extra: hide the installed package.
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "tensorboard" else object())
    with pytest.raises(UserError, match=r"pip install 'amptui\[tensorboard\]'"):
        preflight.check_tensorboard(config.build_config({}, {"log.tensorboard": True}))
