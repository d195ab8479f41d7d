"""The models of the presets: torchvision AlexNet and ResNet-18, the AMP recipe's MLP, a small CNN."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from amptui.core.config.schema import ModelConfig, RunConfig
from amptui.core.errors import UserError
from amptui.core.prepare import usercode
from amptui.core.prepare.pretrained import torchvision_weights
from amptui.trainer.gpt import GPT

CNNS = ("alexnet", "resnet18", "smallcnn")


class SmallCNN(nn.Module):
    """Three conv blocks and a linear head: small enough for any CPU, big enough to show AMP at work."""

    def __init__(self, num_classes: int = 10, width: int = 32):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.BatchNorm2d(4 * w), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def recipe_mlp(width: int = 4096, depth: int = 3) -> nn.Sequential:
    """The PyTorch AMP recipe's make_model: (depth - 1) x [Linear(width, width), ReLU] + Linear(width, width)."""
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, width))
    return nn.Sequential(*layers)


def build_model(model_cfg: ModelConfig) -> nn.Module:
    if model_cfg.factory:
        return build_user_model(model_cfg)
    name = model_cfg.name
    if name == "smallcnn":
        return SmallCNN(model_cfg.num_classes, model_cfg.width)
    if name == "mlp":
        return recipe_mlp(model_cfg.width, model_cfg.depth)
    if name == "planlab":
        from amptui.trainer.planlab import PlanLab

        return PlanLab(model_cfg.width, model_cfg.depth)
    if name == "gpt":
        return GPT(model_cfg.n_layer, model_cfg.n_head, model_cfg.n_embd, model_cfg.block_size,
                   ffn_gain=model_cfg.ffn_gain)
    if name in ("alexnet", "resnet18"):
        from torchvision import models  # seconds to import: only for the models that need it

        return _torchvision_model(models, name, model_cfg.num_classes, model_cfg.pretrained)
    raise ValueError(f"unknown model {name!r}")


def compile_if_asked(module: nn.Module, run_cfg: RunConfig) -> nn.Module:
    """`run.compile`: the module the loop calls, wrapped in torch.compile (compiled lazily, on the
    first forward). The caller keeps the plain module for checkpoints, so state_dict keys stay
    the same with and without compilation."""
    # torch.compile types its result as a callable; given a module it returns a module (OptimizedModule)
    return cast(nn.Module, torch.compile(module)) if run_cfg.compile else module


def build_user_model(model_cfg: ModelConfig) -> nn.Module:
    """`model.factory = "package.module:function"`: called with `model.args` as keyword arguments
    (plus num_classes when it names that parameter or takes **kwargs); must return an nn.Module.
    Every failure is a UserError naming the factory."""
    ref, key = model_cfg.factory, "model.factory"
    fn = usercode.load_factory(ref, key)
    kwargs = usercode.model_kwargs(fn, model_cfg.args or {}, model_cfg.num_classes)
    usercode.check_call(fn, ref, key, kwargs)
    model = usercode.call_factory(fn, ref, key, kwargs)
    if not isinstance(model, nn.Module):
        raise UserError(f'{key} = "{ref}" returned {type(model).__name__}, not a torch.nn.Module')
    if not any(True for _ in model.parameters()):
        raise UserError(f'{key} = "{ref}" returned a {type(model).__name__} without parameters; there is '
                        "nothing to train")
    return model


def _torchvision_model(models, name: str, num_classes: int, pretrained: bool) -> nn.Module:
    """ImageNet weights come from the local torch hub cache (checked before the run starts); the
    classifier is replaced when the class count differs from ImageNet's 1000."""
    if not pretrained:
        return getattr(models, name)(weights=None, num_classes=num_classes)
    weights = torchvision_weights(models, name)
    model = getattr(models, name)(weights=weights)
    if num_classes != 1000:
        if name == "alexnet":
            model.classifier[6] = nn.Linear(model.classifier[6].in_features, num_classes)
        else:
            model.fc = nn.Linear(model.fc.in_features, num_classes)
    return model
