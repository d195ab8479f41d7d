"""A replayed step (numerics.trace_nonfinite) or a paused block leaves the next step's range sample
alone: a finding belongs only to the step it happened on, and the step after a replay shows its own
headroom (the "overflow coming" figures), not the replay's inf. The real Trainer in this process on
scaler-lab's small CNN in float16 + GradScaler, whose known module overflows on step 1's batch only."""

from __future__ import annotations

import pytest
import torch
from support.numerics import FP16, KNOWN, module, of_kind, trainer_for
from support.records import events
from torch import nn

import amptui

pytestmark = pytest.mark.timeout(300)


def overflow_on_first_batch(trainer) -> None:
    """The known conv's output goes past float16's range on step 1's batch (so on its replay too,
    which runs that same batch again), and on no other batch."""
    seen: list[torch.Tensor] = []
    on_first = [False]

    def note_batch(_model, args):
        if not seen:
            seen.append(args[0])
        on_first[0] = args[0] is seen[0]

    def enlarge(_m, _i, out):
        return out * 1e6 if on_first[0] else None

    trainer.state.model.register_forward_pre_hook(note_batch)
    module(trainer, KNOWN).register_forward_hook(enlarge)


def three_steps(runs_dir, trace: bool) -> list[dict]:
    trainer = trainer_for(runs_dir, **FP16, **{"numerics.every": 1, "numerics.trace_nonfinite": trace,
                                               "log.every": 1})
    overflow_on_first_batch(trainer)
    batches = trainer.recorder.timed(trainer.state.train_data.batches(0))
    try:
        for _ in range(3):
            trainer.train_step(batches)
            trainer.write_step_record()  # a record per step, as log.every=1 has it
    finally:
        trainer.finish("completed")
    return events(trainer.run_dir)


def test_the_step_after_a_replayed_step_keeps_its_own_sample(runs_dir):
    replayed = three_steps(runs_dir / "replayed", trace=True)
    plain = three_steps(runs_dir / "plain", trace=False)

    # step 1 overflowed and was replayed: its finding names the known module, with its value
    trained = [(r["step"], r["skipped"]) for r in of_kind(replayed, "step")]
    assert trained == [(1, 1), (2, 0), (3, 0)]
    assert [(r["step"], r["skipped"]) for r in of_kind(plain, "step")] == trained
    samples = {r["step"]: r for r in of_kind(replayed, "numerics")}
    assert samples[1]["traced"] is True and samples[1]["first_nonfinite"]["module"] == KNOWN
    assert [r["step"] for r in of_kind(replayed, "scaler")] == [1]
    # steps 2 and 3 trained: no finding, every layer finite, and the known module's real headroom
    for step in (2, 3):
        assert "first_nonfinite" not in samples[step], samples[step]
        assert not any(layer.get("nonfinite") for layer in samples[step]["layers"]), samples[step]
    # ... the very figures the same run shows without a replay (a skipped step changes nothing)
    unreplayed = {r["step"]: r for r in of_kind(plain, "numerics")}
    assert samples[2]["layers"] == unreplayed[2]["layers"]
    known = next(layer for layer in samples[2]["layers"] if layer["name"] == KNOWN)
    assert known["forward"] is not None and known["forward"] > 0
    warned = [r["message"] for r in of_kind(replayed, "warning") if r.get("code") == "first_nonfinite"]
    assert warned == [f"step 1 overflowed; first non-finite: {samples[1]['first_nonfinite']['text']}"]


def test_a_forward_in_a_paused_block_does_not_reach_the_next_sample(runs_dir):
    """A Monitor user's evaluation run with gradients on, inside mon.paused(), between two steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    with amptui.Monitor("paused", scaler=scaler, optimizer=opt, model=model, run_dir=runs_dir / "m",
                        config={"numerics": {"every": 1, "depth": 1}, "amp": {"dtype": "float16"}},
                        log_every=1) as mon:
        for _ in range(2):
            with torch.autocast("cpu", torch.float16):
                loss = model(torch.randn(4, 8)).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss)
            opt.zero_grad()
            with mon.paused(), torch.autocast("cpu", torch.float16):  # far out of float16's range
                model(torch.full((4, 8), 1e6)).float().sum().backward()
            opt.zero_grad()
    samples = of_kind(events(runs_dir / "m"), "numerics")
    assert [r["step"] for r in samples] == [1, 2]
    for sample in samples:
        assert "first_nonfinite" not in sample and not any(layer.get("nonfinite") for layer in sample["layers"])
