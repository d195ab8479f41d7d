"""The trainer and amptui.Monitor record through one telemetry package: honest step windows
(training steps only), no host read of a device value in a steady-state step, an lr schedule that
skipped steps never advance, and the same step-record fields from both writers."""

from __future__ import annotations

import pytest
from support.cli import amptui as amptui_cli
from support.records import events, only_run

TINY = {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
        "data.batch_size": 16, "data.train_samples": 256, "data.val_samples": 32, "data.num_workers": 0}
VARIANTS = {  # float16 stays tiny on a CPU
    "fp32": {"amp.autocast": False, "amp.grad_scaler": False},
    "bf16": {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": False},
    "fp16+scaler": {"amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True,
                    "amp.init_scale": 2.0 ** 16, "debug.inject_inf_every": 3},
    # per-layer range samples every 2nd step: hooks, gradient abs-max and underflow counts, all on the device
    "fp16+scaler+numerics": {"amp.autocast": True, "amp.dtype": "float16", "amp.grad_scaler": True,
                             "amp.init_scale": 2.0 ** 16, "debug.inject_inf_every": 3, "numerics.every": 2},
}


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


@pytest.mark.slow
def test_the_window_clock_excludes_a_slow_checkpoint_and_a_slow_evaluation(runs_dir):
    slow = 5.0  # seconds slept in each evaluation and each checkpoint write (debug keys)
    overrides = {**TINY, **VARIANTS["fp32"], "data.train_samples": 128, "run.epochs": 2, "log.every": 4,
                 "debug.slow_checkpoint_s": slow, "debug.slow_eval_s": slow}
    amptui_cli("run", "scaler-lab", *sum((["--set", f"{k}={str(v).lower()}"] for k, v in overrides.items()), []),
               check=True, timeout=300)
    recs = events(only_run(runs_dir))
    epochs = by_kind(recs, "epoch")
    assert len(epochs) == 2
    for epoch in epochs:
        assert epoch["eval_time_s"] >= slow and epoch["checkpoint_time_s"] >= slow
    spent = sum(e["epoch_time_s"] + e["eval_time_s"] + e["checkpoint_time_s"] for e in epochs)
    assert spent <= by_kind(recs, "end")[0]["total_time_s"], "the three parts never overlap"
    steps = by_kind(recs, "step")
    windows = [s["step_time_ms"] * 4 / 1000 for s in steps]  # 8 steps per epoch, a record every 4
    assert len(windows) == 4 and sum(windows) == pytest.approx(sum(e["epoch_time_s"] for e in epochs), rel=0.01)
    after_pause = windows[2]  # epoch 2's first window comes right after epoch 1's evaluation and checkpoint
    others = [w for i, w in enumerate(windows) if i != 2]
    assert after_pause < sum(others) / len(others) + slow, "the window after them holds neither"
    assert all(s["data_wait_ms"] is not None and 0 <= s["data_wait_ms"] < s["step_time_ms"] for s in steps)
