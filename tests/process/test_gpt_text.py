"""The `gpt` model and the byte-level `text` data: shapes, the causal mask, the blocks FSDP wraps,
the corpus (a file, a folder, Python's standard library by default), its split and windows, the
refusals, the numerics-lab preset's promise (its last block, and only that one, outgrows float16),
and a real `gpt-text` run whose loss falls."""

from __future__ import annotations

import pytest
from support.cli import amptui
from support.records import events, only_run

pytestmark = pytest.mark.timeout(300)


# --- a real run --------------------------------------------------------------------------------

@pytest.mark.slow
def test_gpt_text_trains_with_falling_loss_and_a_validation_loss(runs_dir):
    proc = amptui("run", "gpt-text", "--set", "run.max_steps=24", "--set", "run.epochs=1",
                  "--set", "data.train_samples=768", "--set", "data.val_samples=64", "--set", "log.every=4",
                  "--set", "amp.autocast=false", "--set", "data.batch_size=32", "--set", "model.block_size=32")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = events(only_run(runs_dir))
    losses = [r["loss"] for r in recs if r["kind"] == "step"]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.5, losses  # from ~ln 256 = 5.5 downwards
    epoch = next(r for r in recs if r["kind"] == "epoch")
    assert epoch["val_loss"] < 5.0 and 0 < epoch["val_acc"] < 1  # next-byte accuracy
    assert recs[-1]["status"] == "completed"
    tf32 = recs[0]["tf32"]  # the start record's TF32 state: torch's defaults, no TF32 on a CPU
    assert (tf32["matmul"], tf32["cudnn"], tf32["supported"]) == (False, True, False)
