"""The precision autopilot's settings and rules (issue 54), in process: [amp.autopilot] is off by default
and checked like any key; rule scale_collapse fires on a collapsing float16 run's records and not on a
healthy GradScaler's calibration; `runs` shows a switched run's precision as its segments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import one_clear_line
from support.dashboard import async_test, settled
from support.paths import FIXTURES
from support.records import events
from textual.app import App

from amptui.core.autopilot import Pilot
from amptui.core.config import autopilot, values
from amptui.core.errors import ConfigError
from amptui.dashboard.widgets.plot import Figure, Line, MetricPlot

SCALER_LAB = FIXTURES / "runs" / "20261121-231557-scaler-lab-058d"   # float16 from init_scale 2**32: healthy
NUMERICS_LAB = next((FIXTURES / "numerics").iterdir())               # float16 whose forward overflows every step


def steps(run: Path) -> list[dict]:
    return [r for r in events(run) if r["kind"] == "step"]


def fed(pilot: Pilot, records: list[dict]):
    return next((d for d in map(pilot.observe, records) if d is not None), None)


def test_a_bad_autopilot_key_is_one_line_naming_it(cli):
    proc = cli("run", "quickstart", "--set", "amp.autopilot={mode=\"always\"}")
    assert "amp.autopilot.mode" in one_clear_line(proc)


def test_the_defaults_let_a_healthy_scalers_calibration_and_backoffs_be():
    """scaler-lab: 2**32 calibrated down in 14 backoffs, then a backoff every few growths (37 skips in
    256 steps): the defaults (below 1 for 50 steps, or 20 skips in 100 after the first clean step) never fire."""
    pilot = Pilot(autopilot.Autopilot(mode="act"), narrow_scaled=True)
    records = steps(SCALER_LAB)
    assert records[-1]["skipped_total"] >= 30
    assert fed(pilot, records) is None and pilot.held_back is None


def test_a_collapsing_float16_run_fires_once_the_scale_stayed_below_the_floor():
    """numerics-lab in float16: every step overflows, the scale halves each step and is below 1 from
    step 17; with floor_steps = 20 the rule fires at the 20th step below 1, with the scale history."""
    pilot = Pilot(autopilot.Autopilot(mode="act", floor_steps=20), narrow_scaled=True)
    decision = fed(pilot, steps(NUMERICS_LAB))
    assert decision is not None and decision.rule == "scale_collapse"
    below = next(r["step"] for r in steps(NUMERICS_LAB) if r["scale"] < 1)
    assert decision.step == below + 19
    assert decision.to == {"amp.dtype": "bfloat16", "amp.grad_scaler": False}
    assert decision.why.startswith("the scale stayed below 1 for 20 steps")
    assert decision.evidence["scale_history"][-1] == [decision.step, steps(NUMERICS_LAB)[decision.step - 1]["scale"], 1]
    assert decision.advice("fp16+scaler") == (
        f"autopilot: would switch fp16+scaler -> bf16 at step {decision.step}: {decision.why} "
        "(--set amp.dtype=bfloat16 --set amp.grad_scaler=false)")
    assert fed(pilot, steps(NUMERICS_LAB)) is None  # once


def test_skips_count_after_the_first_clean_step_only():
    rule = autopilot.Autopilot(mode="act", skip_limit=3, skip_window=10, floor_steps=1000)
    calibration = [{"step": n, "scale": 2.0 ** (20 - n), "skipped": 1} for n in range(1, 10)]
    pilot = Pilot(rule, narrow_scaled=True)
    assert fed(pilot, calibration) is None  # nine skips in a row before any clean step: calibration
    later = [{"step": 10, "scale": 2048.0, "skipped": 0}] + [
        {"step": n, "scale": 1024.0, "skipped": 1} for n in (11, 12, 13)]
    decision = fed(pilot, later)
    assert decision is not None and decision.step == 13 and decision.why.startswith("3 steps skipped in the last 10")


def test_where_bfloat16_is_slow_the_rule_says_so_and_does_not_switch():
    pilot = Pilot(autopilot.Autopilot(mode="act", floor_steps=20), narrow_scaled=True, wide_fast=False)
    assert fed(pilot, steps(NUMERICS_LAB)) is None
    assert pilot.held_back is not None and "bfloat16 is slow on this device" in pilot.held_back


def test_only_a_float16_run_with_a_scaler_has_the_rule():
    pilot = Pilot(autopilot.Autopilot(mode="act", floor_steps=1), narrow_scaled=False)
    assert fed(pilot, steps(NUMERICS_LAB)) is None


def switch_record(step: int, before: str, after: str) -> dict:
    return {"v": 1, "kind": "precision_switch", "t": 1.0, "rank": 0, "step": step, "rule": "scale_collapse",
            "from": {"short": before}, "to": {"short": after}, "why": "", "evidence": {}, "checkpoint": ""}


def test_runs_shows_a_switched_runs_precision_as_its_segments(cli, runs_dir):
    run = runs_dir / SCALER_LAB.name
    shutil.copytree(SCALER_LAB, run)
    with (run / "events.jsonl").open("a") as fh:  # as if its autopilot had switched at step 120
        fh.write(json.dumps(switch_record(120, "fp16+scaler", "bf16")) + "\n")
    table = cli("runs", check=True).stdout
    assert "fp16+scaler -> bf16 at step 120" in table
    listed = json.loads(cli("runs", "--format", "json", check=True).stdout)
    assert listed[0]["precision"] == "fp16+scaler -> bf16 at step 120"


class PlotApp(App):
    def compose(self):
        yield MetricPlot(id="plot")


@async_test
async def test_every_plot_marks_the_switch_with_a_vertical_line():
    """A Figure's marks (the run screen's panels and the compare plots pass the switches' steps) draw a
    line down the plot at that step: a column that is drawn in on (nearly) every row of the frame."""
    xs = list(range(1, 101))
    app = PlotApp()
    async with app.run_test(size=(60, 16)) as pilot:
        plot = app.query_one(MetricPlot)
        drawn = []
        for marks in ((), (50.0,)):
            plot.update_figure(Figure([Line(xs, [1.0 + x / 100 for x in xs])], x_range=(1, 100), marks=marks))
            await settled(pilot)
            drawn.append(plot.render().plain.splitlines())
        plain, marked = drawn

        def full_columns(lines):
            top = next(i for i, line in enumerate(lines) if "┌" in line)
            bottom = next(i for i, line in enumerate(lines) if "└" in line)
            left, right = lines[top].index("┌"), lines[top].index("┐")
            rows = lines[top + 1:bottom]
            return [c for c in range(left + 1, right) if sum(line[c] == "│" for line in rows) >= len(rows) - 1]

        assert not full_columns(plain)
        (column,) = full_columns(marked)
        assert abs(column - len(marked[0]) // 2) < 6  # step 50 of 1..100: the middle of the plot


def test_a_float8_layer_whose_sqnr_stays_low_leaves_float8_and_only_it():
    """Rule float8_sqnr counts each layer's samples under sqnr_db (plan-lab 64 wide: outlier 13-17 dB, the
    others 28-31 dB); at sqnr_alarms of them that layer joins amp.float8_skip, once."""
    settings = autopilot.Autopilot(mode="act", sqnr_db=20.0, sqnr_alarms=3)
    pilot = Pilot(settings, narrow_scaled=False, float8_skip=["head"])
    sample = [{"name": "hidden.0", "recipe": "tensorwise", "sqnr_db": 29.3},
              {"name": "outlier", "recipe": "tensorwise", "sqnr_db": 15.4}]
    decisions = [pilot.observe_numerics({"step": step, "float8": sample}) for step in (2, 4, 6, 8)]
    assert decisions[:2] == [None, None] and decisions[3] is None
    decision = decisions[2]
    assert decision is not None and decision.rule == "float8_sqnr" and decision.step == 6
    assert decision.to == {"amp.float8_skip": ["head", "outlier"]}
    assert decision.evidence["samples"] == [[2, 15.4], [4, 15.4], [6, 15.4]]
    assert "outlier's float8 tensorwise GEMM output stayed under 20 dB SQNR in 3 samples" in decision.why
    assert Pilot(autopilot.Autopilot(mode="act"), narrow_scaled=False).observe_numerics(
        {"step": 2, "float8": sample}) is None  # not a float8 run of amptui's trainer: no such rule
    default = Pilot(autopilot.Autopilot(mode="act"), narrow_scaled=False, float8_skip=[])
    assert all(default.observe_numerics({"step": s, "float8": sample}) is None for s in range(1, 10))  # 10 dB


def test_a_rewinds_redone_samples_count_once_toward_the_sqnr_alarms():
    """A rewind (rule widen_overflow without a GradScaler) trains the steps since its last checkpoint again and
    their range samples come again: a layer's low samples at the same steps count once (the newer one)."""
    pilot = Pilot(autopilot.Autopilot(mode="act", sqnr_db=20.0, sqnr_alarms=3), narrow_scaled=False, float8_skip=[])
    sample = [{"name": "outlier", "recipe": "tensorwise", "sqnr_db": 15.4}]
    assert all(pilot.observe_numerics({"step": step, "float8": sample}) is None for step in (2, 4, 2, 4))
    decision = pilot.observe_numerics({"step": 6, "float8": sample})
    assert decision is not None and decision.evidence["samples"] == [[2, 15.4], [4, 15.4], [6, 15.4]]


def overflow_warning(step: int, module: str = "blocks.3.mlp.proj", cause: str = "precision_overflow") -> dict:
    return {"kind": "warning", "code": "nonfinite_cause", "message": "...",
            "cause": {"cause": cause, "step": step, "module": module, "where": "forward", "dtype": "float16"}}


def test_a_module_the_triage_pins_an_overflow_on_is_widened_up_to_the_limit():
    settings = autopilot.Autopilot(mode="act")
    pilot = Pilot(settings, narrow_scaled=True, layers={})
    assert pilot.observe_warning(overflow_warning(3, cause="input")) is None  # bad data: no precision fix
    decision = pilot.observe_warning(overflow_warning(3))
    assert decision is not None and decision.rule == "widen_overflow" and decision.step == 3
    assert decision.to == {"amp.layers": {"blocks.3.mlp.proj": "fp32"}}
    assert decision.advice("fp16+scaler").endswith("""(--set amp.layers={"blocks.3.mlp.proj" = 'fp32'})""")
    assert values.parse_set(["amp.layers={\"blocks.3.mlp.proj\" = 'fp32'}"]) == {"amp.layers": decision.to["amp.layers"]}
    assert Pilot(settings, narrow_scaled=True).observe_warning(overflow_warning(3)) is None  # not the trainer's run
    limited = Pilot(settings, narrow_scaled=True, layers={"a": "fp32", "b": "fp32"}, widened=2)
    assert limited.observe_warning(overflow_warning(5)) is None and "widen_limit" in (limited.held_back or "")


def test_a_float8_tail_turns_float8_off_for_the_last_share_of_steps():
    settings = autopilot.Autopilot(mode="act", tail_share=0.25)
    pilot = Pilot(settings, narrow_scaled=False, float8_skip=[], total_steps=100)
    fired = [d for d in (pilot.observe({"step": s, "scale": None, "skipped": 0}) for s in range(10, 101, 10)) if d]
    assert [(d.rule, d.step, d.to) for d in fired] == [("float8_tail", 80, {"amp.float8": "off"})]
    assert Pilot(autopilot.Autopilot(mode="act"), narrow_scaled=False, float8_skip=[], total_steps=100).observe(
        {"step": 99, "scale": None, "skipped": 0}) is None  # tail_share 0: off
    with pytest.raises(ConfigError, match="amp.autopilot.tail_share must be a number in"):
        values.build_config({"amp": {"autopilot": {"tail_share": 1.0}}})


def test_promotion_converts_the_safe_gaining_linears_after_the_warm_up_and_not_the_outlier():
    """Rule promote on plan-lab's own plan samples (steps 2-6 of a 64-wide run: the SQNRs measured) with its
    GEMMs at plan-lab's real size (2048 rows and features, where an H100 gains from float8): at the first step
    record from promote_after on, hidden.0 and hidden.1 go fp8; outlier (10.8 dB) and the first and last
    linears (under the 25 dB edge floor) stay. At 64 wide nothing gains on an H100 and nothing moves."""
    samples = [json.loads(line) for line in (FIXTURES / "autopilot" / "plan-lab-64-plan-samples.jsonl").open()]
    settings = autopilot.Autopilot(mode="act", promote_after=6)
    small = Pilot(settings, narrow_scaled=False, layers={})
    for sample in samples:
        small.observe_plan(sample)
    assert small.observe({"step": 6, "scale": None, "skipped": 0}) is None  # too small to gain

    pilot = Pilot(settings, narrow_scaled=False, layers={})
    for sample in samples:
        pilot.observe_plan({**sample, "layers": [{**x, "m": 2048, "k": 2048, "n": 2048} for x in sample["layers"]]})
    assert pilot.observe({"step": 4, "scale": None, "skipped": 0}) is None  # still warming up
    decision = pilot.observe({"step": 6, "scale": None, "skipped": 0})
    assert decision is not None and decision.rule == "promote"
    assert decision.to == {"amp.layers": {"hidden.0": "fp8", "hidden.1": "fp8"}}
    assert set(decision.evidence["kept"]) == {"inp", "outlier", "head"}
    assert "20 dB SQNR floor" in decision.evidence["kept"]["outlier"]


def test_a_monitored_loop_gets_the_advice_and_nothing_changes(runs_dir, tmp_path, monkeypatch):
    """amptui.Monitor on an unmodified float16 loop whose forward overflows every step (a linear 1e6 too
    large, as tests/scripts/fp16_overflow.py): amptui does not own the loop, so [amp.autopilot] act only
    advises, in one `autopilot` warning naming the change to make in the loop."""
    import torch
    from support.machine import cpu_rates_here

    import amptui

    cpu_rates_here(tmp_path, monkeypatch, bfloat16=0.2)  # bfloat16 fast here, whatever this CPU does
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        model[2].weight.mul_(1e6)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4)
    config = {"amp": {"dtype": "float16", "autopilot": {"mode": "act", "floor_steps": 5}}}
    with amptui.Monitor("monitored", scaler=scaler, optimizer=opt, model=model, config=config, log_every=1) as mon:
        for _ in range(15):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(torch.rand(16, 8) + 1.0).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            mon.step(loss)
    records = events(mon.run_dir)
    said = [r["message"] for r in records if r["kind"] == "warning" and r.get("code") == "autopilot"]
    assert len(said) == 1 and said[0].startswith("autopilot: would switch fp16+scaler -> bf16 at step "), said
    assert "torch.autocast(..., dtype=torch.bfloat16), no GradScaler" in said[0]
    assert not [r for r in records if r["kind"] == "precision_switch"] and scaler.is_enabled()


def test_promotion_on_this_devices_measured_roof_gains_at_64_wide_where_its_float8_is_fast(tmp_path, monkeypatch):
    """promote_for = "here": the run's device's roofline from its measured bfloat16 and float8 matmul rates
    (the peak cache `amptui doctor` fills; pinned here as a device whose float8 GEMM is 4x its bfloat16 one).
    On plan-lab's 64-wide samples it promotes hidden.0 and hidden.1 and keeps outlier, inp and head; a device
    whose float8 is no faster promotes nothing."""
    import torch
    from support.machine import cpu_rates_here

    from amptui.machine.roof import measured_roof

    assert autopilot.of(values.build_config({"amp": {"autopilot": {"promote_for": "here"}}}).amp).promote_for == "here"
    samples = [json.loads(line) for line in (FIXTURES / "autopilot" / "plan-lab-64-plan-samples.jsonl").open()]
    settings = autopilot.Autopilot(mode="act", promote_after=6, promote_for="here")
    for float8, promoted in ((0.8, {"hidden.0": "fp8", "hidden.1": "fp8"}), (0.2, None)):
        cpu_rates_here(tmp_path / str(float8), monkeypatch, bfloat16=0.2, float8=float8)
        roof, why = measured_roof(torch.device("cpu"))
        assert why is None and roof is not None and roof.measured and roof.peak_tflops == {"bf16": 0.2, "fp8": float8}
        pilot = Pilot(settings, narrow_scaled=False, layers={}, roof=roof)
        for sample in samples:
            pilot.observe_plan(sample)
        decision = pilot.observe({"step": 6, "scale": None, "skipped": 0})
        assert (decision.to["amp.layers"] if decision else None) == promoted
        if decision is not None:
            assert set(decision.evidence["kept"]) == {"inp", "outlier", "head"} and decision.layers == ("hidden.0", "hidden.1")
    done = Pilot(settings, narrow_scaled=False, layers={}, roof=roof, fired_before=("promote",))
    done.observe_plan(samples[0])
    assert done.observe({"step": 6, "scale": None, "skipped": 0}) is None  # once a run
    nowhere = Pilot(settings, narrow_scaled=False, layers={}, roof_why="no float8 GEMM measured on cpu")
    nowhere.observe_plan(samples[0])
    assert nowhere.observe({"step": 6, "scale": None, "skipped": 0}) is None and "no float8 GEMM" in nowhere.held_back


def test_a_float8_tail_can_start_at_the_lrs_decay_onset():
    """tail_on_decay: the first step record whose lr is under the highest an earlier one showed (a warm-up's
    rise is not decay; a plateau's first drop is) moves the float8 linears to high precision, before tail_share."""
    lrs = [0.1, 0.5, 1.0, 1.0, 1.0, 0.5, 0.25, 0.25, 0.25, 0.25]
    records = [{"step": 10 * (n + 1), "lr": lr, "scale": None, "skipped": 0} for n, lr in enumerate(lrs)]
    settings = autopilot.Autopilot(mode="act", tail_share=0.1, tail_on_decay=True)
    decision = fed(Pilot(settings, narrow_scaled=False, float8_skip=[], total_steps=100), records)
    assert decision is not None and (decision.rule, decision.step, decision.to) == ("float8_tail", 60, {"amp.float8": "off"})
    assert decision.why.startswith("the lr began to decay by step 60 (0.5, under its peak 1)")
    assert decision.evidence["peak_lr"] == 1.0
    off = fed(Pilot(autopilot.Autopilot(mode="act", tail_share=0.1), narrow_scaled=False, float8_skip=[],
                    total_steps=100), records)
    assert off is not None and off.step == 90 and "tail_on_decay" not in off.evidence  # tail_share alone
    assert fed(Pilot(autopilot.Autopilot(mode="act", tail_on_decay=True, rules=("scale_collapse",)),
                     narrow_scaled=False, float8_skip=[], total_steps=100), records) is None  # rule not listed
    with pytest.raises(ConfigError, match="amp.autopilot.tail_on_decay must be true or false"):
        values.build_config({"amp": {"autopilot": {"tail_on_decay": "yes"}}})


def test_a_resumed_run_goes_on_counting_the_rules_fired_and_the_rewinds(runs_dir):
    """What the autopilot counts a run is in each checkpoint (`autopilot_state`): after a promotion, `amptui
    resume` does not promote again (once a run), and the rewinds made count toward retry_limit. In process, a
    tiny quickstart run: a promote decision (no layer changed) is switched at step 4 through the trainer's own
    switch (whose triage then replays on the new model, not the one it replaced), then the run is resumed from
    that checkpoint as `amptui resume` does."""
    from amptui.core import autopilot as rules
    from amptui.core.config import presets
    from amptui.jobs import launch
    from amptui.trainer.loop import Trainer

    tiny = {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
            "data.batch_size": 16, "data.val_samples": 0, "data.num_workers": 0, "log.every": 4, "run.epochs": 1,
            "log.checkpoint_every": 0, "data.train_samples": 128, "amp.autocast": False,
            "amp.autopilot": {"mode": "act", "rules": ["promote"], "promote_after": 2}}
    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), tiny, runs_dir)
    first = Trainer(run_dir, resume=False)
    first.setup()
    assert first.autopilot is not None
    first.autopilot.rewinds = 1
    first.autopilot.pending = rules.Decision("promote", 0, {"amp.layers": {}}, "0 layers to float8", "test")
    first.autopilot.switch()
    first.finish("stopped")
    assert [r["rule"] for r in events(run_dir) if r["kind"] == "precision_switch"] == ["promote"]
    assert first.triage is not None and first.triage.state is first.state  # the next non-finite step: on the new model
    resumed = Trainer(run_dir, resume=True)
    resumed.setup()
    assert resumed.autopilot is not None
    assert resumed.autopilot.fired == ["promote"] and resumed.autopilot.rewinds == 1
    assert not resumed.autopilot.pilot.pilot._promoting()  # once a run, across the resume
    resumed.finish("stopped")


def fires_at(step: int):
    """A rule firing at the step record of `step` (telemetry Autopilot.observe's place): stands in for the rules,
    whose conditions are the other tests'."""
    from amptui.core import autopilot as rules

    def observe(self, record):
        if record is None or record.step != step or getattr(self, "fired", False):
            return None, None
        self.fired = True
        return rules.Decision("promote", step, {"amp.layers": {}}, "0 layers to float8", "the test's rule"), None

    return observe


fires_at_8 = fires_at(8)  # quickstart, tiny: the first epoch's last step


def tiny_quickstart(mode: str) -> dict:
    """quickstart, tiny: 8 steps an epoch, a step record every 3, 2 epochs."""
    return {"run.device": "cpu", "run.reuse_host_memory": False, "model.width": 8, "data.img_size": 16,
            "data.batch_size": 16, "data.val_samples": 0, "data.num_workers": 0, "log.every": 3, "run.epochs": 2,
            "log.checkpoint_every": 0, "data.train_samples": 128, "amp.autocast": False,
            "amp.autopilot": {"mode": mode, "rules": ["promote"]}}


def trained(runs_dir, mode: str, rank: int = 0) -> list[dict]:
    from amptui.core.config import presets
    from amptui.jobs import launch
    from amptui.trainer.loop import Trainer

    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), tiny_quickstart(mode), runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    trainer.dist.rank = rank
    trainer.finish(trainer.train())
    return events(run_dir)


def test_a_rule_that_fires_at_an_epochs_last_record_switches_at_that_step(runs_dir, monkeypatch):
    """The step record that ends an epoch is a decision point too: the switch happens at its step (the checkpoint
    the decision names), not after one more step in the old precision. In process, a tiny quickstart run."""
    from amptui.telemetry.autopilot import Autopilot as Rules

    monkeypatch.setattr(Rules, "observe", fires_at_8)
    records = trained(runs_dir, "act")
    assert [r["step"] for r in records if r["kind"] == "precision_switch"] == [8]
    assert [r["step"] for r in records if r["kind"] == "step"] == [3, 6, 8, 9, 12, 15, 16]
    assert records[-1]["status"] == "completed"


def test_a_switch_decided_at_the_runs_last_step_is_said_not_dropped(runs_dir, monkeypatch):
    """act, a rule firing at the last step's record: no step is left to switch at, so the run completes in its
    precision and a warning says what was decided and the keys that would make it (a next run's --set)."""
    from amptui.telemetry.autopilot import Autopilot as Rules

    monkeypatch.setattr(Rules, "observe", fires_at(16))
    records = trained(runs_dir, "act")
    assert not [r for r in records if r["kind"] == "precision_switch"] and records[-1]["status"] == "completed"
    said = [r["message"] for r in records if r["kind"] == "warning" and r.get("code") == "autopilot"]
    assert said == ["autopilot: would switch fp32 -> 0 layers to float8 at step 16: the test's rule "
                    "(--set amp.layers={}); not switched: that was the run's last step"], said


def test_under_torchrun_advise_speaks_on_rank_0_only(runs_dir, monkeypatch):
    """advise under torchrun: rank 0 says the advice (as act takes rank 0's decision), not one line a rank. A
    second rank stands in as this one process's rank number (the 2-rank gloo run is test_autopilot_switch.py's)."""
    from amptui.telemetry.autopilot import Autopilot as Rules

    monkeypatch.setattr(Rules, "observe", fires_at_8)
    said = [[r["message"] for r in trained(runs_dir, "advise", rank) if r["kind"] == "warning" and r.get("code") == "autopilot"]
            for rank in (0, 1)]
    assert len(said[0]) == 1 and said[0][0].startswith("autopilot: would switch fp32 -> 0 layers to float8 at step 8")
    assert said[1] == []
