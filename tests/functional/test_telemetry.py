"""The trainer and amptui.Monitor record through one telemetry package: honest step windows
(training steps only), no host read of a device value in a steady-state step, an lr schedule that
skipped steps never advance, and the same step-record fields from both writers."""

from __future__ import annotations

import contextlib
import time

import pytest
import torch
from support.records import events
from torch import nn

import amptui
from amptui.core.config import presets
from amptui.core.stream.records import STEP_FIELDS, Step
from amptui.jobs import launch
from amptui.telemetry import torch_amp
from amptui.trainer.loop import Trainer

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
HOST_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__", "numpy", "cpu")


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


def prefetched(trainer: Trainer, n: int):
    """The epoch's first n batches, drawn before the measured steps: the input pipeline's own work
    (a CPU dataset indexes with tensors) is not the training step's."""
    loader = trainer.state.train_data.batches(0)
    return trainer.recorder.timed(iter([next(loader) for _ in range(n)]))


def make_trainer(runs_dir, **overrides) -> Trainer:
    """The real Trainer, in this process, on a scaler-lab-sized model (run.device=cpu)."""
    run_dir, _ = launch.create_run(presets.find_preset("scaler-lab"), {**TINY, **overrides}, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    return trainer


@contextlib.contextmanager
def counting_host_reads(monkeypatch):
    """CUDA's sync-debug mode is not there on a CPU, so every Python-level read of a tensor's value
    (item, tolist, float/int/bool/index, numpy, cpu) is counted by wrapping it -- the wrapper
    stands in only for CUDA's sync-debug mode."""
    counts = {"n": 0, "where": []}
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _original=original, _name=name, **k):
            counts["n"] += 1
            counts["where"].append(_name)
            return _original(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        yield counts
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_steady_state_trainer_step_reads_nothing_from_the_device(runs_dir, monkeypatch, variant):
    trainer = make_trainer(runs_dir, **VARIANTS[variant], **{"log.every": 8})
    try:
        batches = prefetched(trainer, 9)
        for _ in range(3):  # warm-up window (the first window also arms the overflow tracer)
            trainer.train_step(batches)
        trainer.write_step_record()
        with counting_host_reads(monkeypatch) as counts:
            for _ in range(6):  # skipped steps included for fp16+scaler (an inf every 3rd step)
                trainer.train_step(batches)
        # A non-fused optimizer makes GradScaler.step read found_inf itself (torch's own sync, not
        # amptui's); on this torch the optimizer should be fused and that read gone too.
        torch_reads = 0 if (not trainer.state.scaler.is_enabled() or torch_amp.steps_without_sync(trainer.state.optimizer)) else 6
        assert counts["n"] == torch_reads, counts["where"]
        trainer.write_step_record()
        if variant.startswith("fp16+scaler"):
            assert trainer.progress.skipped_total == 3  # steps 3, 6 and 9
        if "numerics" in variant:  # the samples came back with the step record's one copy
            sampled = [r["step"] for r in events(trainer.run_dir) if r["kind"] == "numerics" and r["layers"]]
            assert {4, 6, 8} <= set(sampled), sampled
    finally:
        trainer.finish("completed")


def test_the_logged_loss_is_the_mean_of_the_micro_batch_losses_under_accumulation(runs_dir):
    """Each optimizer step gives the window its micro-batches' mean as one loss (so a non-finite
    one is named by its step); the step record and the epoch's train loss stay the mean over every
    micro-batch the criterion saw."""
    trainer = make_trainer(runs_dir, **{"amp.accumulate": 3, "log.every": 2})
    seen: list[float] = []
    trainer.state.criterion.register_forward_hook(lambda _m, _i, out: seen.append(float(out.detach())))
    try:
        batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
        for _ in range(2):
            trainer.train_step(batches)
        first = trainer.recorder.write_step()
        trainer.train_step(batches)  # a one-step window
        second = trainer.recorder.write_step()
        assert len(seen) == 9 and first is not None and second is not None
        assert first.loss == pytest.approx(sum(seen[:6]) / 6, rel=1e-6)
        assert second.loss == pytest.approx(sum(seen[6:]) / 3, rel=1e-6)
        assert trainer.recorder.epoch_train_loss() == pytest.approx(sum(seen) / 9, rel=1e-6)
    finally:
        trainer.finish("completed")


def test_the_lr_schedule_never_advances_on_a_skipped_step(runs_dir):
    trainer = make_trainer(runs_dir, **VARIANTS["fp16+scaler"], **{"sched.name": "cosine", "log.every": 5})
    try:
        sched = trainer.state.schedule.impl
        batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
        lrs = []
        for _ in range(12):
            lrs.append(trainer.state.optimizer.param_groups[0]["lr"])
            trainer.train_step(batches)
            if trainer.progress.step % 5 == 0:
                trainer.write_step_record()
        trainer.write_step_record()
        assert trainer.progress.skipped_total == 4  # steps 3, 6, 9, 12
        assert sched.last_epoch == 12 - 4, "the schedule advanced once per clean step"
        # The lr a skipped step would have left for the next step is unchanged by it.
        assert lrs[3] == lrs[2] and lrs[6] == lrs[5] and lrs[9] == lrs[8]
        assert len(set(lrs)) > 4, "a schedule that moves"
    finally:
        trainer.finish("completed")


def test_monitor_and_trainer_write_the_same_step_fields(runs_dir):
    trainer = make_trainer(runs_dir, **VARIANTS["fp16+scaler"], **{"log.every": 2})
    try:
        batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
        for _ in range(2):
            trainer.train_step(batches)
        trainer.write_step_record()
    finally:
        trainer.finish("completed")
    trainer_step = by_kind(events(trainer.run_dir), "step")[0]

    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    with amptui.Monitor("fields", scaler=scaler, optimizer=opt, model=model, log_every=2,
                        run_dir=runs_dir / "monitor-run") as mon:
        for x in mon.batches([torch.randn(8, 4) for _ in range(2)]):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(x).square().mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss, batch_size=8)
            opt.zero_grad()
    monitor_step = by_kind(events(runs_dir / "monitor-run"), "step")[0]
    base = {"v", "kind", "t", "rank"}
    required = [name for name in STEP_FIELDS if name not in Step.OPTIONAL]
    assert set(required) | base <= set(trainer_step) <= set(STEP_FIELDS) | base
    assert set(required) | base <= set(monitor_step) <= set(STEP_FIELDS) | base
    optional = set(STEP_FIELDS) - set(required)
    assert set(trainer_step) - optional == set(monitor_step) - optional
    assert trainer_step["data_wait_ms"] >= 0 and monitor_step["data_wait_ms"] >= 0


# Each pause is told from the other by CHECKPOINT_S at least (the two swapped, eval_time_s would be
# CHECKPOINT_S and some overhead); none is waited out beyond that.
EVAL_S, CHECKPOINT_S = 0.4, 0.2


def test_monitor_pauses_evaluation_out_of_the_window_and_times_the_loader(runs_dir):
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def slow_loader():
        for _ in range(4):
            time.sleep(0.05)
            yield torch.randn(8, 4)

    began = time.perf_counter()  # the Monitor starts its clock as it is made
    # log_every=5 > 4 steps: their record is written by epoch(), its window spanning the pauses
    with amptui.Monitor("paused", optimizer=opt, model=model, log_every=5, run_dir=runs_dir / "m") as mon:
        for x in mon.batches(slow_loader()):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(loss, batch_size=8)
        with mon.paused():
            time.sleep(EVAL_S)  # the user's evaluation
        with mon.paused("checkpoint"):
            time.sleep(CHECKPOINT_S)
        mon.epoch(val_acc=0.5)
        wall = time.perf_counter() - began  # every clock stopped by here (not counting the run's close)
    recs = events(runs_dir / "m")
    step = by_kind(recs, "step")[0]
    assert step["data_wait_ms"] >= 45, "the loader's sleeps are the loop's data wait"
    epoch = by_kind(recs, "epoch")[0]
    assert epoch["eval_time_s"] >= EVAL_S and epoch["checkpoint_time_s"] >= CHECKPOINT_S
    # The pauses are not training time: the three clocks share the wall time this block took (had
    # the pauses been counted, the sum would exceed it by 0.6 s, less the Monitor's making and the
    # record's writing), whatever the machine's load.
    assert epoch["epoch_time_s"] > 0
    assert epoch["epoch_time_s"] + epoch["eval_time_s"] + epoch["checkpoint_time_s"] <= wall + 0.01, (epoch, wall)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("variant", ["fp32", "bf16", "fp16+scaler", "fp16+scaler+numerics"])
def test_the_steady_state_loop_never_syncs_on_cuda(runs_dir, variant):
    overrides = {**VARIANTS[variant], "run.device": "cuda", "log.every": 8}
    if variant.startswith("fp16+scaler"):
        overrides["amp.init_scale"] = 2.0 ** 16
    trainer = make_trainer(runs_dir, **overrides)
    try:
        assert not trainer.state.scaler.is_enabled() or torch_amp.steps_without_sync(trainer.state.optimizer)
        batches = prefetched(trainer, 9)
        for _ in range(3):
            trainer.train_step(batches)
        trainer.write_step_record()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(6):
                trainer.train_step(batches)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        trainer.write_step_record()
    finally:
        trainer.finish("completed")


def test_telemetry_sits_below_the_trainer_and_the_monitor():
    """amptui/telemetry imports neither the trainer, the Monitor nor the dashboard, and the Monitor
    reaches nothing of the trainer: the shared package is below both."""
    import ast
    from pathlib import Path

    import amptui.telemetry as telemetry

    def imports(path: Path) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found.add("." * node.level + (node.module or ""))
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        return found

    package = Path(telemetry.__file__).parent
    for path in package.glob("*.py"):
        crossed = {m for m in imports(path) if any(layer in m for layer in ("trainer", "monitor", "dashboard",
                                                                            "textual"))}
        assert not crossed, f"{path.name} imports {crossed}"
    assert not {m for m in imports(package.parent / "monitor.py") if "trainer" in m}
