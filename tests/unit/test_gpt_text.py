"""The `gpt` model and the byte-level `text` data: shapes, the causal mask, the blocks FSDP wraps,
the corpus (a file, a folder, Python's standard library by default), its split and windows, the
refusals, the numerics-lab preset's promise (its last block, and only that one, outgrows float16),
and a real `gpt-text` run whose loss falls."""

from __future__ import annotations

import math

import pytest
import torch

from amptui.core.config.presets import find_preset
from amptui.core.prepare import textcorpus
from amptui.trainer.gpt import GPT, NextTokenLoss
from amptui.trainer.models import build_model
from amptui.trainer.textdata import build_text_batches

pytestmark = pytest.mark.timeout(300)

FLOAT16_MAX = 65504.0


def gpt_config(**sets):
    return find_preset("gpt-text").config(sets)


# --- the model --------------------------------------------------------------------------------

def test_gpt_maps_tokens_to_next_token_logits_with_its_blocks_exposed():
    model = build_model(gpt_config(**{"model.n_layer": 3, "model.n_embd": 32, "model.n_head": 4,
                                      "model.block_size": 16}).model)
    assert isinstance(model, GPT)
    assert isinstance(model.blocks, torch.nn.ModuleList) and len(model.blocks) == 3  # what FSDP shards
    x = torch.randint(256, (2, 16))
    logits = model(x)
    assert logits.shape == (2, 16, 256)
    assert model.head.weight is model.tok_emb.weight  # tied
    loss = NextTokenLoss()(logits, torch.randint(256, (2, 16)))
    assert loss.shape == () and abs(loss.item() - math.log(256)) < 0.5  # about uniform at init
    with pytest.raises(ValueError, match="block_size"):
        model(torch.randint(256, (1, 17)))


def test_gpt_is_causal_a_later_token_never_changes_an_earlier_logit():
    torch.manual_seed(0)
    model = GPT(n_layer=2, n_head=2, n_embd=32, block_size=12).eval()
    x = torch.randint(256, (1, 12))
    changed = x.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 256
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert torch.equal(a[0, :7], b[0, :7])
    assert not torch.allclose(a[0, 7:], b[0, 7:])


def test_numerics_lab_last_block_outgrows_float16_and_only_it():
    """The preset's story, measured in float32 at init on its own corpus: the last block's MLP
    output passes float16's largest finite value, every earlier block stays well inside it."""
    cfg = find_preset("numerics-lab").config()
    torch.manual_seed(cfg.run.seed)
    model = build_model(cfg.model)
    peaks: dict[str, float] = {}
    for i, block in enumerate(model.blocks):
        block.mlp.proj.register_forward_hook(
            lambda _m, _i, out, i=i: peaks.__setitem__(f"blocks.{i}", out.abs().max().item()))
    train, _ = build_text_batches(cfg, 0, 1, torch.device("cpu"))
    x, _ = train.batch(0, 0)
    with torch.no_grad():
        model(x)
    last = f"blocks.{cfg.model.n_layer - 1}"
    assert peaks[last] > 2 * FLOAT16_MAX, peaks
    assert all(v < FLOAT16_MAX / 8 for k, v in peaks.items() if k != last), peaks  # >= 3 bits of headroom
    assert peaks["blocks.0"] < peaks["blocks.1"] < peaks["blocks.2"]  # headroom shrinks with depth


# --- the text ----------------------------------------------------------------------------------

def test_default_corpus_is_pythons_standard_library():
    files = textcorpus.corpus_files("")
    assert files and all(f.suffix == ".py" for f in files)
    assert any(f.name == "os.py" for f in files)
    assert not any("site-packages" in f.parts for f in files)
    assert len(textcorpus.read_corpus(files)) > 2_000_000  # several MB of real text
