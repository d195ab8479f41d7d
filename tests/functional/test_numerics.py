"""Range headroom per layer ([numerics]) and the first non-finite module: the real Trainer in this
process on a tiny float16 + GradScaler model (scaler-lab's small CNN, width 8), with a large
activation put into a known module (forward) or a large gradient into one (backward)."""

from __future__ import annotations

import pytest
import torch
from support.numerics import FP16, KNOWN, module, of_kind, trainer_for
from support.records import events
from torch import nn

import amptui
from amptui.core.config import presets
from amptui.core.numerics import fmt_value, summarize
from amptui.jobs import launch
from amptui.telemetry.numerics import modules_at_depth
from amptui.trainer.loop import Trainer

pytestmark = pytest.mark.timeout(300)
BF16 = {"amp.autocast": True, "amp.dtype": "bfloat16", "amp.grad_scaler": False}


def run_steps(trainer: Trainer, steps: int) -> list[dict]:
    batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
    try:
        for _ in range(steps):
            trainer.train_step(batches)
        trainer.write_step_record()
    finally:
        trainer.finish("completed")
    return events(trainer.run_dir)


def large_activation(trainer: Trainer) -> None:
    """The known conv's output goes far past float16's 65,504 (about 4e6), and stays so."""
    with torch.no_grad():
        module(trainer, KNOWN).weight.mul_(1e6)


def large_gradient(trainer: Trainer) -> None:
    """The gradient flowing back into the known conv's output is multiplied past float16's range."""
    def hook(_m, _i, out):
        if out.requires_grad:
            out.register_hook(lambda g: g * 1e8)
    module(trainer, KNOWN).register_forward_hook(hook)


def test_sampled_headroom_covers_every_module_and_names_a_forward_overflow(runs_dir):
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.every": 1})
    expected = [name for name, _ in modules_at_depth(trainer.state.model, 2)]
    large_activation(trainer)
    recs = run_steps(trainer, 2)
    samples = [r for r in of_kind(recs, "numerics") if r["layers"]]
    assert [r["step"] for r in samples] == [1, 2]
    assert [layer["name"] for layer in samples[0]["layers"]] == expected
    assert samples[0]["dtype"] == "float16" and samples[0]["max_finite"] == 65504.0
    first = samples[0]["first_nonfinite"]
    assert first["module"] == KNOWN and first["where"] == "forward", first
    assert first["text"].startswith(f"{KNOWN} (forward, float16 ")
    # the layers before it still had headroom; the scaler's backoff names the same module
    before = samples[0]["layers"][:expected.index(KNOWN)]
    assert all(layer["forward"] is not None and layer["forward"] > 0 for layer in before)
    backoff = next(r for r in of_kind(recs, "scaler") if r["event"] == "backoff" and r["step"] == 1)
    assert backoff["first_nonfinite"]["module"] == KNOWN
    warned = [r["message"] for r in of_kind(recs, "warning")]
    assert any(f"first non-finite: {KNOWN} (forward" in m for m in warned), warned


def test_a_gradient_overflow_is_named_in_backward(runs_dir):
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.every": 1})
    large_gradient(trainer)
    recs = run_steps(trainer, 1)
    first = of_kind(recs, "numerics")[0]["first_nonfinite"]
    assert first["module"] == KNOWN and first["where"] == "backward", first
    assert "float16 max exceeded at loss scale 2^8" in first["text"]


def test_trace_nonfinite_replays_the_batch_and_measures_the_value(runs_dir):
    """Sampling off: the skipped step is run again with hooks on every module; the module that
    overflowed is run once more in float32 to say by how much."""
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.every": 0, "numerics.trace_nonfinite": True})
    large_activation(trainer)
    before = {n: p.detach().clone() for n, p in trainer.state.model.named_parameters()}
    recs = run_steps(trainer, 2)
    traced = of_kind(recs, "numerics")
    assert [r["step"] for r in traced] == [1] and traced[0]["traced"] is True  # one replay per step record
    first = traced[0]["first_nonfinite"]
    assert first["module"] == KNOWN and first["where"] == "forward"
    assert first["value"] > 65504 and first["text"] == f"{KNOWN} (forward, float16 max exceeded: {fmt_value(first['value'])})"
    # skipped steps and a replay leave the parameters as they were
    assert all(torch.equal(before[n], p) for n, p in trainer.state.model.named_parameters())


def test_trace_nonfinite_names_a_backward_overflow(runs_dir):
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.trace_nonfinite": True})
    large_gradient(trainer)
    first = of_kind(run_steps(trainer, 1), "numerics")[0]["first_nonfinite"]
    assert first["module"] == KNOWN and first["where"] == "backward"


def test_the_same_run_in_bfloat16_does_not_overflow(runs_dir):
    trainer = trainer_for(runs_dir, **BF16, **{"numerics.every": 1})
    large_activation(trainer)
    recs = run_steps(trainer, 2)
    samples = of_kind(recs, "numerics")
    assert samples and all(r["dtype"] == "bfloat16" and "first_nonfinite" not in r for r in samples)
    layers = [layer for r in samples for layer in r["layers"]]
    assert not any(layer.get("nonfinite") for layer in layers)
    known = [layer["forward"] for layer in layers if layer["name"] == KNOWN]
    assert all(bits > 100 for bits in known), known  # ~4e6 is nothing to bfloat16's 3.4e38


def test_sampling_off_hooks_nothing(runs_dir):
    trainer = trainer_for(runs_dir, **FP16)
    assert trainer.recorder.numerics is None
    assert not any(m._forward_hooks for m in trainer.state.model.modules())
    assert not of_kind(run_steps(trainer, 1), "numerics")


def test_the_trainers_warning_names_the_step_whose_loss_went_non_finite(runs_dir):
    """The trainer keeps each optimizer step's loss apart in its window (read back with the record's
    one copy): an overflow on step 3 of a 4-step window is named "at step 3", not "in steps 1-4",
    with the module behind it."""
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.every": 1, "log.every": 4, "amp.accumulate": 2})

    def overflow_on_step_3(_m, _i, out):  # before the range sampler's hook, so it sees it too
        return out * 1e6 if trainer.progress.step + 1 == 3 else None
    module(trainer, KNOWN).register_forward_hook(overflow_on_step_3, prepend=True)
    recs = run_steps(trainer, 4)
    (step,) = of_kind(recs, "step")
    assert step["step"] == 4 and step["loss"] is None  # the window's mean: not finite, so not a number on disk
    assert [r["step"] for r in of_kind(recs, "scaler") if r["event"] == "backoff"] == [3]
    said = [r["message"] for r in of_kind(recs, "warning") if r["code"] == "loss_not_finite"]
    assert len(said) == 1 and said[0].startswith(
        f"the loss is not finite (NaN or inf) at step 3 because {KNOWN}'s forward output exceeded float16's range "
        f"(first non-finite: {KNOWN} (forward, float16 "), said


def test_monitor_samples_any_module_and_names_the_first_overflow(runs_dir):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    with amptui.Monitor("numerics", scaler=scaler, optimizer=opt, model=model, run_dir=runs_dir / "m",
                        config={"numerics": {"every": 1, "depth": 1}, "amp": {"dtype": "float16"}},
                        log_every=2) as mon:
        for i in range(2):
            with torch.no_grad():
                if i == 1:
                    model[2].weight.mul_(1e6)
            with torch.autocast("cpu", torch.float16):
                loss = model(torch.randn(4, 8)).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss)
            opt.zero_grad()
    samples = of_kind(events(runs_dir / "m"), "numerics")
    assert [[layer["name"] for layer in r["layers"]] for r in samples] == [["0", "1", "2", "3"]] * 2
    assert "first_nonfinite" not in samples[0]
    assert samples[1]["first_nonfinite"]["module"] == "2"
    # its window's loss went inf because "2" overflowed (a Monitor sums its window): said so, in loop words
    said = [r["message"] for r in of_kind(events(runs_dir / "m"), "warning") if r["code"] == "loss_not_finite"]
    assert len(said) == 1 and "in steps 1-2 because 2's forward output exceeded float16's range" in said[0], said
    assert "autocast to torch.bfloat16 in your loop" in said[0] and "amp.dtype" not in said[0]


LAB = {"run.device": "cpu", "run.max_steps": 2, "data.batch_size": 4, "data.val_samples": 0,
       "log.checkpoint_every": 0, "log.every": 2}


def lab_trainer(runs_dir, **overrides) -> Trainer:
    run_dir, _ = launch.create_run(presets.find_preset("numerics-lab"), {**LAB, **overrides}, runs_dir)
    trainer = Trainer(run_dir, resume=False)
    trainer.setup()
    return trainer


def test_numerics_lab_in_float16_names_the_last_blocks_mlp_and_samples_every_block(runs_dir):
    trainer = lab_trainer(runs_dir)
    recs = run_steps(trainer, 2)
    samples = [r for r in of_kind(recs, "numerics") if r["layers"]]
    assert samples and all(r["dtype"] == "float16" for r in samples)
    names = [layer["name"] for layer in samples[0]["layers"]]
    assert [n for n in names if n.startswith("blocks.")] == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    by_name = {layer["name"]: layer for layer in samples[0]["layers"]}
    assert by_name["blocks.3"]["nonfinite"] == "forward"
    assert by_name["blocks.0"]["forward"] > by_name["blocks.1"]["forward"] > by_name["blocks.2"]["forward"] > 0
    first = samples[0]["first_nonfinite"]  # replayed (trace_nonfinite): the deepest module, and by how much
    assert first["module"] == "blocks.3.mlp.proj" and first["where"] == "forward" and first["value"] > 65504
    assert samples[0]["traced"] is True
    backoffs = [r for r in of_kind(recs, "scaler") if r["event"] == "backoff"]
    assert backoffs and backoffs[0]["first_nonfinite"]["text"].startswith(
        "blocks.3.mlp.proj (forward, float16 max exceeded: ")
    # the loss is inf because of that overflow: the warning says so before the data/lr advice
    loss = next(r["message"] for r in of_kind(recs, "warning") if r["code"] == "loss_not_finite")
    assert loss.startswith("the loss is not finite (NaN or inf) ") and (
        " because blocks.3.mlp.proj's forward output exceeded float16's range (first non-finite: blocks.3.mlp.proj "
        "(forward, float16 max exceeded: ") in loss, loss
    assert loss.index("use amp.dtype=bfloat16") < loss.index("check the data for NaN/inf")


def test_numerics_lab_skipping_every_step_names_one_cause_in_every_warning(runs_dir):
    """numerics-lab in float16 skips every step (the dashboard's "no finite loss yet"): calibration
    runs out at step 16 and the scale falls below 1 at step 17. Every warning about the loss and
    the scale names the same cause, blocks.3.mlp.proj's forward overflow, and the same fix; none
    sends the user to look for NaN in the data first."""
    trainer = lab_trainer(runs_dir, **{"run.max_steps": 17, "log.every": 4})
    try:
        assert trainer.train() == "completed"  # the trainer's own loop: a step record every 4 steps
    finally:
        trainer.finish("completed")
    recs = events(trainer.run_dir)
    steps = of_kind(recs, "step")
    assert steps[-1]["skipped_total"] == 17 and all(s["loss"] is None for s in steps)
    said = {r["code"]: r["message"] for r in of_kind(recs, "warning") if r["code"] != "config"}
    assert {"loss_not_finite", "first_nonfinite", "backoff_streak", "scale_below_one"} <= set(said), said
    for code in ("loss_not_finite", "backoff_streak", "scale_below_one"):
        # the module a replay found (blocks.3.mlp.proj), or the sampled block that holds it
        assert "first non-finite: blocks.3" in said[code] and "(forward, float16 max exceeded" in said[code], said[code]
        # "(slow on this device ...)" follows bfloat16 where this CPU's measured rates say so (load moves them)
        assert "no loss scale can fix" in said[code] and "use amp.dtype=bfloat16" in said[code], said[code]
        assert "or scale that layer's init/output" in said[code], said[code]
        assert "Look for NaN" not in said[code] and "Check the data" not in said[code], said[code]
    assert "(upstream of the forward overflow)" in said["backoff_streak"]


def test_numerics_lab_in_bfloat16_does_not_overflow(runs_dir):
    trainer = lab_trainer(runs_dir, **{"amp.dtype": "bfloat16", "amp.grad_scaler": False})
    recs = run_steps(trainer, 2)
    samples = of_kind(recs, "numerics")
    assert samples and all(r["dtype"] == "bfloat16" and "first_nonfinite" not in r for r in samples)
    assert not any(layer.get("nonfinite") for r in samples for layer in r["layers"])
    blocks3 = [layer["forward"] for r in samples for layer in r["layers"] if layer["name"] == "blocks.3"]
    assert blocks3 and min(blocks3) > 100  # ~4e5 is far inside bfloat16's ~3.4e38
    assert not of_kind(recs, "scaler")


def test_compare_names_each_runs_narrowest_layer():
    """The numerics-lab float16 run of the dashboard fixtures: blocks.3's output held inf/NaN."""
    from support.dashboard import FIXTURES, NUMERICS, QUICK

    from amptui.core.comparison import compare, comparenotes, runsummary

    summary = runsummary.summarize(FIXTURES / "numerics" / NUMERICS)
    row = compare.compare_rows([summary])[0]
    assert (row.headroom_bits, row.headroom_layer) == ("nonfinite", "blocks.3")
    note = comparenotes.headroom_note([summary])
    # the replay's finding (the last of 40 steps), and ln_f and head as downstream of it, not as findings
    source = "inf/NaN first in blocks.3.mlp.proj (forward, float16 max exceeded: 3.6e5), 2 later layers downstream of it"
    assert note == f"narrowest range headroom: {NUMERICS} (fp16+scaler): {source}"
    assert note in comparenotes.notes([summary])
    # the dashboard's compare screen says it per run, numerics off included (never None or "?")
    assert comparenotes.headroom_words(summary) == source
    unsampled = runsummary.summarize(FIXTURES / "runs" / QUICK)
    assert comparenotes.narrowest_headroom(unsampled) is None
    assert comparenotes.headroom_words(unsampled) == "not sampled (numerics off)"


def test_the_numerics_table_counts_forward_and_gradient_inf_apart_and_fits_80_columns():
    """numerics-lab in float16 (the dashboard fixture): blocks.3 overflows in its forward on every
    step, ln_f and head pass its inf on, and every gradient upstream (tok_emb's too) is inf. The
    table says which layer overflows: tok_emb's 40 are gradient inf only, blocks.3 is `first`."""
    from support.dashboard import FIXTURES, NUMERICS

    from amptui.cli.numerics import as_json, as_table
    from amptui.core.stream.events import read_events

    summary = summarize(read_events(FIXTURES / "numerics" / NUMERICS / "events.jsonl"))
    lines = as_table(NUMERICS, summary).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("layer "))
    table = lines[header:header + 1 + len(summary.layers)]
    assert table[0].split() == ["layer", "forward", "grad", "narrowest", "underflow", "inf", "fwd", "inf", "grad", "first"]
    assert all(len(line) <= 80 for line in [*lines[:header], *table]), lines
    row = {line.split()[0]: line for line in table[1:]}
    fwd_end, grad_end = table[0].index("inf fwd") + 7, table[0].index("inf grad") + 8
    assert row["tok_emb"][:fwd_end].split()[-1] == "-" and row["tok_emb"][:grad_end].endswith(" 40")
    assert row["blocks.3"][:fwd_end].endswith(" 40") and row["blocks.3"].endswith(" 40")  # and `first`
    assert row["head"][:fwd_end].endswith(" 40") and len(row["head"]) <= fwd_end  # passes it on: not first
    assert any(line.startswith("inf fwd: samples whose output held inf/NaN; inf grad: ") for line in lines)
    assert "narrowest: blocks.3 (inf/NaN; 2 later layers downstream of it), blocks.2 5.2 bits, blocks.1 12.9 bits" in lines
    layers = {x["name"]: x for x in as_json(NUMERICS, summary)["layers"]}
    assert [layers["tok_emb"][k] for k in ("nonfinite_forward_samples", "nonfinite_grad_samples",
                                            "first_nonfinite_count", "nonfinite_samples")] == [0, 40, 0, 40]
    assert [layers["blocks.3"][k] for k in ("nonfinite_forward_samples", "nonfinite_grad_samples",
                                             "first_nonfinite_count")] == [40, 0, 40]
    assert layers["ln_f"]["nonfinite_forward_samples"] == 40 and layers["ln_f"]["first_nonfinite_count"] == 0


def test_a_long_layer_name_is_cut_in_its_middle_to_keep_the_table_in_80_columns():
    from amptui.cli.numerics import as_json, as_table

    name = "decoder.layers.11.encoder_attn.out_proj"
    recs = [{"kind": "numerics", "step": 1, "dtype": "float16", "max_finite": 65504.0,
             "layers": [{"name": name, "forward": 0.5, "grad": 118.25, "underflow": 1.0}]}]
    lines = as_table("run", summarize(recs)).splitlines()
    assert lines[2].split() == ["layer", "forward", "grad", "narrowest", "underflow"]  # no inf/NaN: no such columns
    assert lines[3].startswith(name)  # room enough without them
    overflowed = [*recs, {**recs[0], "step": 2, "layers": [{"name": name, "nonfinite": "forward"}],
                          "first_nonfinite": {"module": name + ".linear", "where": "forward"}}]
    lines = as_table("run", summarize(overflowed)).splitlines()
    row = next(line for line in lines if line.startswith("deco"))
    assert len(lines[2]) <= 80 and len(row) <= 80 and row.split()[0] == "deco...n.out_proj", lines
    assert row.split()[1:] == ["-", "-", "inf/NaN", "-", "1", "1"]  # the latest sample's, the narrowest ever
    assert as_json("run", summarize(overflowed))["layers"][0]["name"] == name  # whole in JSON


def test_the_same_first_nonfinite_layer_on_every_step_is_one_line():
    from amptui.cli.numerics import first_nonfinite_runs

    same = [{"step": s, "module": "blocks.3.mlp.proj", "where": "forward", "value": v, "traced": True}
            for s, v in ((1, 3.8e5), (2, 3.5e5), (3, 3.9e5))]
    other = {"step": 7, "module": "head", "where": "backward", "value": None}
    runs = first_nonfinite_runs([*same, other])
    assert [r[0] for r in runs] == [[1, 2, 3], [7]]
    assert runs[0][2] == [3.8e5, 3.5e5, 3.9e5] and runs[1][2] == []


def test_a_closed_monitor_leaves_no_sampling_hooks_on_the_model(runs_dir):
    """The last step record prepares the next sampled step; once the Monitor closes, that step
    never comes: the user's model must not keep amptui's hooks (its later forwards and backwards
    would keep paying for them)."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with amptui.Monitor("closed", optimizer=opt, model=model, run_dir=runs_dir / "c",
                        config={"numerics": {"every": 2}}, log_every=1) as mon:
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch_size=8)  # step 1: step 2 is due, so it is prepared
    assert not any(m._forward_hooks for m in model.modules())
    assert not any(p._backward_hooks for p in model.parameters())


def test_a_monitor_says_it_does_not_replay_when_asked_to(runs_dir):
    """trace_nonfinite needs amptui's trainer; a Monitor given it says so once instead of dropping it."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with amptui.Monitor("asked", optimizer=opt, model=model, run_dir=runs_dir / "t", log_every=1,
                        config={"numerics": {"every": 1, "trace_nonfinite": True}}) as mon:
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        mon.step(1.0, batch_size=8)
    warned = [r["message"] for r in of_kind(events(runs_dir / "t"), "warning")]
    assert sum("numerics.trace_nonfinite: the Monitor does not replay" in m for m in warned) == 1, warned
