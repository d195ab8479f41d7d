"""The precision autopilot acting (issue 54), with real trainer processes: autopilot-lab's float16 run
collapses, switches to bfloat16 at a checkpoint and completes; its losses after the switch are, bit
for bit, those of the same run resumed by hand from the switch's checkpoint in bfloat16; `advise`
changes nothing. bfloat16 counts as fast here through a pinned rate cache (rule 1 acts only where it
is), so nothing depends on this CPU's bfloat16 speed: the model is 64 wide and runs 50 steps."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from support.cli import amptui
from support.machine import cpu_rates_here
from support.paths import SCRIPTS
from support.records import events, only_run
from support.waits import wait_until
from support.webstub import recording

from amptui.core.config import values

pytestmark = pytest.mark.slow

SHORT = ("--set", "run.max_steps=50")


@pytest.fixture
def bf16_fast(tmp_path, monkeypatch):
    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.2)


def losses_after(run, step: int) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in events(run) if r["kind"] == "step" and r["step"] > step}


def test_a_collapsing_float16_run_switches_to_bf16_exactly_as_a_hand_resume(bf16_fast, runs_dir, tmp_path):
    with recording() as hook:  # log.notify_url: one message for the switch
        amptui("run", "autopilot-lab", *SHORT, "--set", f"log.notify_url=\"{hook.url}/hook\"", check=True)
        wait_until(lambda: hook.requests, 30, "the switch's notification")
    sent = [r["body"].decode() for r in hook.requests]
    assert len(sent) == 1 and "switched fp16+scaler -> bf16 at step" in sent[0], sent
    run = only_run(runs_dir)
    records = events(run)
    switches = [r for r in records if r["kind"] == "precision_switch"]
    assert len(switches) == 1, switches
    switch = switches[0]
    at = switch["step"]
    assert switch["rule"] == "scale_collapse" and switch["from"]["short"] == "fp16+scaler"
    assert switch["to"]["short"] == "bf16" and switch["to"]["keys"] == {"amp.dtype": "bfloat16",
                                                                         "amp.grad_scaler": False}
    assert switch["evidence"]["scale_history"][-1][0] == at and 0 < at < 50
    assert (switch["from"]["layers"], switch["to"]["layers"]) == ({"*": "fp16+scaler"}, {"*": "bf16"})
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    after = [r for r in records if r["kind"] == "step" and r["step"] > at]
    assert after and all(r["scale"] is None and r["skipped"] == 0 for r in after)  # the scaler is gone
    assert f"fp16+scaler -> bf16 at step {at}" in amptui("runs", check=True).stdout

    # by hand: the switch's checkpoint, config.toml set to bfloat16 without a GradScaler, resumed
    hand = tmp_path / "hand" / run.name
    (hand / "checkpoints").mkdir(parents=True)
    shutil.copyfile(switch["checkpoint"], hand / "checkpoints" / "last.pt")
    cfg = values.build_config(values.read_toml(run / "config.toml")).with_overrides(
        {"amp.dtype": "bfloat16", "amp.grad_scaler": False, "amp.autopilot": {}, "log.notify_url": ""})
    (hand / "config.toml").write_text(values.to_toml(cfg.to_dict()))
    subprocess.run([sys.executable, "-m", "amptui.trainer", str(hand), "--resume"], check=True,
                   capture_output=True, timeout=600)
    assert [r["status"] for r in events(hand) if r["kind"] == "end"] == ["completed"]
    assert losses_after(run, at) == losses_after(hand, at)  # bit for bit: JSON keeps a float exactly
    assert len(losses_after(run, at)) == 50 - at


def test_advise_changes_nothing_and_says_what_act_would_do(bf16_fast, runs_dir):
    amptui("run", "autopilot-lab", *SHORT, "--set",
           "amp.autopilot={mode=\"advise\",floor_steps=20,rules=[\"scale_collapse\"]}", check=True)
    amptui("run", "autopilot-lab", *SHORT, "--set", "amp.autopilot={}", check=True)
    advised, plain = sorted(runs_dir.iterdir(), key=lambda p: events(p)[0]["t"])
    assert not [r for r in events(advised) if r["kind"] == "precision_switch"]
    said = [r["message"] for r in events(advised) if r["kind"] == "warning" and r.get("code") == "autopilot"]
    assert len(said) == 1 and said[0].startswith("autopilot: would switch fp16+scaler -> bf16 at step "), said
    assert losses_after(advised, 0) == losses_after(plain, 0)


def test_a_watched_script_gets_advice_and_nothing_else(bf16_fast, runs_dir):
    """fp16_overflow.py: an unmodified float16 loop whose forward overflows on every step. amptui does not
    own its loop, so even mode = "act" only advises: the script's output and losses are those of the
    same script run without the autopilot, and stderr says what to change in the loop."""
    script = str(SCRIPTS / "fp16_overflow.py")
    advised = amptui("run", "--script", script, "--set", "log.every=1",
                     "--set", "amp.autopilot={mode=\"act\",floor_steps=10}", check=True)
    plain = amptui("run", "--script", script, "--set", "log.every=1", check=True)
    first, second = sorted(runs_dir.iterdir(), key=lambda p: events(p)[0]["t"])
    said = [r["message"] for r in events(first) if r["kind"] == "warning" and r.get("code") == "autopilot"]
    assert len(said) == 1 and said[0].startswith("autopilot: would switch fp16+scaler -> bf16 at step "), said
    assert "torch.autocast(..., dtype=torch.bfloat16), no GradScaler" in said[0]
    assert f"warning: {said[0]}" in advised.stdout + advised.stderr  # amptui's lines; the script's: output.log
    assert not [r for r in events(first) if r["kind"] == "precision_switch"]
    assert "autopilot" not in plain.stdout + plain.stderr
    script_lines = [[line for line in (run / "output.log").read_text().splitlines() if not line.startswith("[amptui]")]
                    for run in (first, second)]
    assert script_lines[0] == script_lines[1]
    assert losses_after(first, 0) == losses_after(second, 0) and len(losses_after(first, 0)) == 30


def test_a_resume_after_the_switch_goes_on_in_the_new_precision(bf16_fast, runs_dir):
    """The switch's checkpoint holds the keys it set: a run that fails after the switch resumes from it
    in bfloat16 (no second switch, no GradScaler), though config.toml still says float16."""
    failed = amptui("run", "autopilot-lab", *SHORT, "--set", "debug.fail_at_step=45")
    assert failed.returncode != 0
    run = only_run(runs_dir)
    (at,) = [r["step"] for r in events(run) if r["kind"] == "precision_switch"]
    assert at < 45
    config = run / "config.toml"
    config.write_text(config.read_text().replace("fail_at_step = 45", "fail_at_step = 0"))
    amptui("resume", run.name, check=True)
    records = events(run)
    assert [r["kind"] for r in records].count("precision_switch") == 1
    resumed = [r for r in records if r["kind"] == "start"][-1]
    assert resumed["resumed_from"] == at and resumed["precision"]["short"] == "bf16"
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    assert all(r["scale"] is None for r in records if r["kind"] == "step" and r["step"] > at)
    assert f"fp16+scaler -> bf16 at step {at}" in amptui("runs", check=True).stdout


PLAN_LAB_FP8 = ("--set", "model.width=64", "--set", "data.batch_size=64", "--set", "data.train_samples=1280",
                "--set", "amp.float8=tensorwise", "--set", "amp.dtype=bfloat16", "--set", "numerics.every=2",
                "--set", "run.max_steps=16")


def test_plan_labs_outlier_layer_leaves_float8_after_its_alarms_and_the_others_stay(runs_dir, tmp_path):
    """plan-lab 64 wide in float8 tensorwise: `outlier` (inputs rounded away by its outlier channels'
    scale) samples 13-17 dB, the other float8 linears 28-31 dB. Rule float8_sqnr at 20 dB moves outlier
    to amp.float8_skip at its third sample; hidden.0 and hidden.1 stay float8; the run completes, and
    goes on exactly as the switch's checkpoint resumed by hand with float8_skip = ["outlier"]."""
    amptui("run", "plan-lab", *PLAN_LAB_FP8, "--set", "amp.autopilot={mode=\"act\",sqnr_db=20.0}", check=True)
    run = only_run(runs_dir)
    records = events(run)
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    at = switch["step"]
    assert switch["rule"] == "float8_sqnr" and switch["to"]["keys"] == {"amp.float8_skip": ["outlier"]}
    assert (switch["from"]["layers"], switch["to"]["layers"]) == ({"outlier": "fp8 tensorwise"}, {"outlier": "bf16"})
    assert [s[0] for s in switch["evidence"]["samples"]] == [2, 4, 6] and at == 6
    sampled = [{f["name"] for f in r.get("float8") or []} for r in records if r["kind"] == "numerics"]
    assert sampled[0] == {"hidden.0", "hidden.1", "outlier"} and sampled[-1] == {"hidden.0", "hidden.1"}
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"

    hand = tmp_path / "hand" / run.name
    (hand / "checkpoints").mkdir(parents=True)
    shutil.copyfile(switch["checkpoint"], hand / "checkpoints" / "last.pt")
    cfg = values.build_config(values.read_toml(run / "config.toml")).with_overrides(
        {"amp.float8_skip": ["outlier"], "amp.autopilot": {}})
    (hand / "config.toml").write_text(values.to_toml(cfg.to_dict()))
    subprocess.run([sys.executable, "-m", "amptui.trainer", str(hand), "--resume"], check=True,
                   capture_output=True, timeout=600)
    assert losses_after(run, at) == losses_after(hand, at) and len(losses_after(run, at)) == (16 - at) // 2  # log.every 2


def test_a_forced_float16_overflow_in_one_module_is_widened_and_the_run_completes(runs_dir):
    """numerics-lab: blocks.3.mlp.proj's forward passes float16's range on every batch (every step skipped).
    The triage names it (`precision_overflow`) at step 1; rule widen_overflow puts that module in float32
    at a checkpoint ([amp.layers]) and the run trains on in float16 + GradScaler: no step skipped after."""
    amptui("run", "numerics-lab", "--set", "run.max_steps=8", "--set", "amp.autopilot={mode=\"act\"}", check=True)
    run = only_run(runs_dir)
    records = events(run)
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    assert switch["rule"] == "widen_overflow" and switch["evidence"]["cause"]["cause"] == "precision_overflow"
    assert switch["to"]["keys"] == {"amp.layers": {"blocks.3.mlp.proj": "fp32"}}
    assert (switch["from"]["layers"], switch["to"]["layers"]) == ({"blocks.3.mlp.proj": "fp16"},
                                                                  {"blocks.3.mlp.proj": "fp32"})
    after = [r for r in records if r["kind"] == "step" and r["step"] > switch["step"]]
    assert after and all(r["skipped"] == 0 and r["loss"] is not None for r in after)
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    assert f"fp16+scaler -> fp16+scaler + 1 fp32 layer at step {switch['step']}" in amptui("runs", check=True).stdout


def test_a_float8_runs_tail_trains_in_high_precision(runs_dir):
    """tail_share = 0.5 of 16 steps: at the step-8 record the run switches float8 off at a checkpoint;
    the range samples after it hold no float8 layer, and it completes."""
    amptui("run", "plan-lab", *PLAN_LAB_FP8, "--set", "amp.autopilot={mode=\"act\",tail_share=0.5}", check=True)
    records = events(only_run(runs_dir))
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    assert switch["rule"] == "float8_tail" and switch["step"] == 8 and switch["to"]["keys"] == {"amp.float8": "off"}
    sampled = [(r["step"], bool(r.get("float8"))) for r in records if r["kind"] == "numerics"]
    assert all(has for step, has in sampled if step <= 8) and not any(has for step, has in sampled if step > 8)
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"


PLAN_LAB_BF16 = ("--set", "model.width=64", "--set", "data.batch_size=64", "--set", "data.train_samples=1280",
                 "--set", "amp.dtype=bfloat16", "--set", "numerics.plan_every=2", "--set", "run.max_steps=12")


def test_a_promotion_run_converts_the_safe_layers_after_the_warm_up_and_not_the_outlier(tmp_path, monkeypatch, runs_dir):
    """plan-lab 64 wide in bfloat16, its plan probe on every 2nd step, promote_after = 6 on this device's own
    roofline (promote_for = "here": its measured matmul rates). At 64 wide no GPU's datasheet roofline gains
    from float8, so the test pins this CPU's rates as a machine whose float8 GEMM is 4x its bfloat16 one (the
    same cache `amptui doctor` fills; rule scale_collapse's tests pin bfloat16 fast the same way). At the
    step-6 record the linears measured safe (hidden.0 and hidden.1, >= 20 dB; the first and last ones where
    they pass the 25 dB edge floor) move to float8 at a checkpoint; outlier (its inputs rounded away,
    11-13 dB) stays bf16; the model rebuilt at the switch runs them in float8, and the run completes."""
    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.2, float8=0.8)
    amptui("run", "plan-lab", *PLAN_LAB_BF16, "--set",
           "amp.autopilot={mode=\"act\",rules=[\"promote\"],promote_after=6,promote_for=\"here\"}", check=True)
    records = events(only_run(runs_dir))
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    assert switch["rule"] == "promote" and switch["step"] == 6, switch
    promoted = switch["to"]["keys"]["amp.layers"]
    assert {"hidden.0", "hidden.1"} <= set(promoted) and "outlier" not in promoted, promoted
    assert set(promoted.values()) <= {"fp8", "fp8-rowwise", "mxfp8"} and switch["to"]["layers"] == promoted
    assert switch["from"]["layers"] == dict.fromkeys(promoted, "bf16")
    assert f"+ {len(promoted)} float8" in switch["to"]["precision"], switch["to"]  # what the rebuilt model converted
    assert "SQNR floor" in switch["evidence"]["kept"]["outlier"] and switch["evidence"]["for"].startswith("this cpu")
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    assert [r["step"] for r in records if r["kind"] == "step"] == [2, 4, 6, 8, 10, 12]


def test_an_overflow_without_a_grad_scaler_rewinds_widens_the_module_and_completes(runs_dir):
    """numerics-lab in float16 without a GradScaler: step 1's forward overflows in blocks.3.mlp.proj and, not
    skipped, leaves NaN weights (the triage then finds them non-finite in float32 too). Rule widen_overflow
    rewinds to the run's start (no checkpoint yet), replays step 1 on the weights it had, finds the module
    (precision_overflow), widens it at a checkpoint of step 0, and the run trains on finite and completes."""
    amptui("run", "numerics-lab", "--set", "run.max_steps=6", "--set", "amp.grad_scaler=false",
           "--set", "amp.autopilot={mode=\"act\"}", check=True)
    records = events(only_run(runs_dir))
    said = [r["message"] for r in records if r["kind"] == "warning" and r.get("code") == "autopilot"]
    assert len(said) == 1 and "rewound from step 1 to step 0 (the start)" in said[0] and "rewind 1 of 2" in said[0]
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    assert switch["rule"] == "widen_overflow" and switch["step"] == 0
    assert switch["evidence"]["cause"]["cause"] == "precision_overflow"
    assert (switch["from"]["layers"], switch["to"]["layers"]) == ({"blocks.3.mlp.proj": "fp16"},
                                                                  {"blocks.3.mlp.proj": "fp32"})
    after = [r for r in records[records.index(switch):] if r["kind"] == "step"]
    assert [r["step"] for r in after] == [1, 2, 3, 4, 5, 6] and all(r["loss"] is not None for r in after)
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    assert "nonfinite_step" not in records[-1]


def test_a_float8_runs_tail_starts_at_the_lrs_decay_onset(runs_dir):
    """cosine with a 5-step warm-up, tail_on_decay: the first step record whose lr is under an earlier one's
    switches float8 off at a checkpoint (the warm-up's rise is not decay); the run completes without float8."""
    amptui("run", "plan-lab", *PLAN_LAB_FP8, "--set", "sched.name=cosine", "--set", "sched.warmup_epochs=0.25",
           "--set", "amp.autopilot={mode=\"act\",tail_on_decay=true}", check=True)
    records = events(only_run(runs_dir))
    (switch,) = [r for r in records if r["kind"] == "precision_switch"]
    lrs = [(r["step"], r["lr"]) for r in records if r["kind"] == "step" and r["step"] <= switch["step"]]
    onset = next(step for n, (step, lr) in enumerate(lrs) if n and lr < max(x for _, x in lrs[:n]))
    assert switch["rule"] == "float8_tail" and switch["step"] == onset and 6 <= onset < 16, lrs
    assert switch["evidence"]["tail_on_decay"] and switch["to"]["keys"] == {"amp.float8": "off"}
    sampled = [(r["step"], bool(r.get("float8"))) for r in records if r["kind"] == "numerics"]
    assert not any(has for step, has in sampled if step > onset)
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"


def test_under_torchrun_every_rank_switches_at_the_same_step_to_the_same_precision(bf16_fast, runs_dir):
    """autopilot-lab on 2 DDP ranks (gloo): rank 0 decides on its records and broadcasts the decision at the
    step record, so both ranks checkpoint, rebuild and restore at the same step into the same precision; both
    train on in bfloat16 without a GradScaler (the same reduced losses) and the run completes."""
    amptui("run", "autopilot-lab", *SHORT, "--set", "dist.mode=ddp", "--set", "dist.nproc_per_node=2", check=True)
    run = only_run(runs_dir)
    ranks = [events(run), [json.loads(line) for line in (run / "events.rank1.jsonl").read_text().splitlines()]]
    switches = [[r for r in records if r["kind"] == "precision_switch"] for records in ranks]
    assert [len(s) for s in switches] == [1, 1], switches
    (zero,), (one,) = switches
    assert zero["step"] == one["step"] and zero["to"] == one["to"] and zero["rule"] == one["rule"] == "scale_collapse"
    at = zero["step"]
    assert zero["to"]["keys"] == {"amp.dtype": "bfloat16", "amp.grad_scaler": False} and 0 < at < 50
    after = [[(r["step"], r["loss"], r["scale"]) for r in records if r["kind"] == "step" and r["step"] > at]
             for records in ranks]
    assert after[0] == after[1] and len(after[0]) == 50 - at and all(scale is None for _, _, scale in after[0])
    assert all(records[-1]["kind"] == "end" and records[-1]["status"] == "completed" for records in ranks)
    assert (run / "checkpoints" / f"switch-step{at}.pt").is_file()
    assert f"fp16+scaler -> bf16 at step {at}" in amptui("runs", check=True).stdout
