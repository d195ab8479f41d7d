"""The `gpt` model and the byte-level `text` data: shapes, the causal mask, the blocks FSDP wraps,
the corpus (a file, a folder, Python's standard library by default), its split and windows, the
refusals, the numerics-lab preset's promise (its last block, and only that one, outgrows float16),
and a real `gpt-text` run whose loss falls."""

from __future__ import annotations

import math

import pytest
import torch
from support.cli import amptui, one_clear_line
from support.records import events, only_run

from amptui.core.config.presets import find_preset
from amptui.core.errors import UserError
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


def test_text_split_and_windows_predict_the_next_byte(isolated):
    corpus = isolated / "book.txt"
    corpus.write_bytes(bytes(range(256)) * 40)  # 10240 bytes: each byte's successor is known
    cfg = gpt_config(**{"data.path": str(corpus), "model.block_size": 16, "data.batch_size": 4,
                        "data.train_samples": 10, "data.val_samples": 8})
    train, val = build_text_batches(cfg, 0, 1, torch.device("cpu"))
    assert len(train.data) == 9216 and len(val.data) == 1024  # the last 10% validate
    assert train.batches_per_epoch == 3  # 10 windows in batches of 4
    batches = list(train.batches(0))
    assert [x.shape[0] for x, _ in batches] == [4, 4, 2]
    x, y = batches[0]
    assert x.shape == y.shape == (4, 16) and x.dtype == torch.long
    assert torch.equal(y, (x + 1) % 256)  # targets are the inputs shifted by one byte
    again = list(train.batches(0, start=1))  # resumable: the same batches from batch 1 on
    assert torch.equal(again[0][0], batches[1][0])
    assert not torch.equal(list(train.batches(1))[0][0], x)  # another epoch, other windows
    assert torch.equal(list(val.batches(0))[0][0], list(val.batches(0))[0][0])


def test_a_folder_of_text_files_is_read_in_order_skipping_binary_and_hidden(isolated):
    folder = isolated / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("second ")
    (folder / "a.md").write_text("first ")
    (folder / "sub" / "c.txt").write_text("third")
    (folder / "blob.bin").write_bytes(b"\0\1\2")
    (folder / ".hidden").write_text("secret")
    files = textcorpus.corpus_files(str(folder))
    assert [f.name for f in files] == ["a.md", "b.txt", "c.txt"]
    assert textcorpus.read_corpus(files) == b"first second third"


def test_bad_text_paths_are_user_errors_naming_data_path(isolated):
    with pytest.raises(UserError, match="data.path = '.*nowhere': no such file or folder"):
        textcorpus.corpus_files(str(isolated / "nowhere"))
    (isolated / "empty").mkdir()
    with pytest.raises(UserError, match="folder without text files"):
        textcorpus.corpus_files(str(isolated / "empty"))
    (isolated / "tiny.txt").write_text("x" * 100)
    with pytest.raises(UserError, match="too few for a validation window of 65 bytes"):
        textcorpus.check(str(isolated / "tiny.txt"), block_size=64)


def test_run_with_a_missing_text_path_is_one_clear_line_and_no_run(cli, runs_dir):
    proc = cli("run", "gpt-text", "--set", "data.path=no/such/corpus")
    line = one_clear_line(proc)
    assert "data.path = 'no/such/corpus': no such file or folder" in line
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_gpt_and_text_go_together(cli):
    line = one_clear_line(cli("run", "quickstart", "--set", "data.name=text"))
    assert 'model.name = "gpt" and data.name = "text" go together' in line
    line = one_clear_line(cli("run", "gpt-text", "--set", "model.n_head=3"))
    assert "model.n_embd (64) must be a multiple of model.n_head (3)" in line


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
