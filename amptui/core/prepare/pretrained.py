"""The ImageNet weights amptui's torchvision models can start from: one table, no torch.

The trainer builds a model with these weights; the preflight checks, before a run folder exists,
that the weights' file is already in the torch hub cache (amptui never downloads weights).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Weights:
    enum: str    # the torchvision weights enum, e.g. models.ResNet18_Weights
    member: str  # the member of that enum
    file: str    # the file name in $TORCH_HOME/hub/checkpoints (the last part of the member's URL)


WEIGHTS = {
    "alexnet": Weights("AlexNet_Weights", "IMAGENET1K_V1", "alexnet-owt-7be5be79.pth"),
    "resnet18": Weights("ResNet18_Weights", "IMAGENET1K_V1", "resnet18-f37072fd.pth"),
}


def torchvision_weights(models, model_name: str):
    """The torchvision weights member for `model_name`, from the torchvision `models` module."""
    entry = WEIGHTS[model_name]
    return getattr(getattr(models, entry.enum), entry.member)
