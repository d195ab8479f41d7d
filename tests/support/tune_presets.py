"""A tiny preset (a CNN 4 wide on 8x8 synthetic images) for the tune tests (`tiny_preset`)."""

from __future__ import annotations

from pathlib import Path

TINY = """\
[run]
description = "tiny CNN for tune tests"
device = "cpu"
[model]
name = "smallcnn"
width = 4
[data]
name = "synthetic"
img_size = 8
batch_size = 8
train_samples = 256
val_samples = 0
[amp]
autocast = false
"""


def tiny_preset(tmp_path: Path, extra: str = "", name: str = "tiny") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TINY + extra)
    return path
