"""plan-lab's model (model.name = "planlab"): an MLP of `model.depth` linears of `model.width`
features, one of them named `outlier`, whose input has a few channels of large magnitude (as
LLM activations have: Dettmers et al., "LLM.int8()"; Sun et al., "Massive activations").

Those channels are OUTLIER_GAIN times the others, one in every quarter of the features; the
outlier linear's weights on them are held at zero (their gradient is masked), so the model
ignores them, as a model learns to. One scale per tensor or per row (fp8 tensorwise, rowwise)
is set by them and rounds the other channels to the 8-bit format's smallest values: `amptui plan` must
find this linear and keep it out of those recipes.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

OUTLIER_GAIN = 1e5
OUTLIER_CHANNELS = 4


class PlanLab(nn.Module):
    def __init__(self, width: int = 64, depth: int = 5):
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(max(depth - 3, 0)))
        self.outlier = nn.Linear(width, width)
        self.head = nn.Linear(width, width)
        channels = [i * width // OUTLIER_CHANNELS + 3 for i in range(OUTLIER_CHANNELS)]
        boost = torch.ones(width)
        boost[channels] = OUTLIER_GAIN
        self.boost: torch.Tensor
        self.keep: torch.Tensor
        self.register_buffer("boost", boost)
        keep = torch.ones(width, width)
        keep[:, channels] = 0.0
        self.register_buffer("keep", keep)
        with torch.no_grad():
            self.outlier.weight.mul_(keep)
        self.outlier.weight.register_hook(lambda g: g * self.keep)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.inp(x))
        for layer in self.hidden:
            h = F.relu(layer(h))
        h = F.relu(self.outlier(h * self.boost))
        return self.head(h)
