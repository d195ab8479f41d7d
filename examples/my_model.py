"""Your own model in an amptui preset: `model.factory = "my_model:build"` (see custom-model.toml).

amptui imports this module from the working directory or PYTHONPATH and calls build() with the
keys of [model] that amptui does not know (here `channels` and `dropout`) as keyword arguments,
plus `num_classes` because build() names it. It must return a torch.nn.Module.

    PYTHONPATH=examples amptui run examples/custom-model.toml
    PYTHONPATH=examples amptui run examples/custom-model.toml --set dist.mode=ddp --set dist.nproc_per_node=2

Everything else -- autocast, GradScaler, DDP (--set dist.mode=ddp), `amptui ab`, the dashboard --
works on it unchanged.
"""

from torch import nn


def build(num_classes: int = 10, channels: int = 16, dropout: float = 0.0) -> nn.Module:
    c = channels
    return nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Dropout(dropout), nn.Linear(2 * c, num_classes),
    )
