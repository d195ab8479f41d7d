"""The trainer side of amptui/core/modes/pure.py: the model cast to the kept 16-bit dtype before
training (parameters, so their gradients and the optimizer's state too), and with
`amp.stochastic_round` an Adam/AdamW whose update is computed in float32 and rounded stochastically
into that dtype (amptui's own few lines; torchao's optimizers call it `bf16_stochastic_round`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch import nn

from amptui.core.errors import UserError
from amptui.core.modes.pure import NAME
from amptui.trainer.modes.base import Conversion, ModeRuntime, register

if TYPE_CHECKING:
    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config
    from amptui.trainer.layers import LayerScope


@dataclass(frozen=True)
class Cast(Conversion):
    dtype: str
    values: int             # floating-point parameter values cast
    stochastic_round: bool

    def record(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "values": self.values, "stochastic_round": self.stochastic_round}

    def note(self, device: torch.device) -> str:
        return (f"parameters, gradients and optimizer state in {self.dtype} ({self.values:,} values), no float32 "
                "master copy" + ("; updates rounded stochastically" if self.stochastic_round else ""))


@register(NAME)
class PureRuntime(ModeRuntime):
    record_key = NAME

    def convert(self, model: nn.Module, precision: Precision, cfg: Config, device: torch.device,
                scope: LayerScope | None) -> Conversion | None:
        values = sum(p.numel() for p in model.parameters() if p.is_floating_point())
        model.to(getattr(torch, precision.dtype))
        return Cast(precision.dtype, values, precision.options.stochastic_round)

    def optimizer(self, cfg: Config, params: list[nn.Parameter], precision: Precision) -> torch.optim.Optimizer | None:
        if not precision.options.stochastic_round:
            return None  # the preset's optimizer, on the 16-bit parameters: its state is theirs
        if cfg.optim.name not in ("adamw", "adam"):
            raise UserError(f"amp.stochastic_round with optim.name = \"{cfg.optim.name}\": amptui rounds Adam's and "
                            "AdamW's update stochastically; use optim.name=adamw, or amp.stochastic_round=false")
        return StochasticAdam(params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
                              decoupled=cfg.optim.name == "adamw", seed=cfg.run.seed)


class StochasticAdam(torch.optim.Optimizer):
    """Adam (AdamW with `decoupled`) for 16-bit parameters: the moments are kept in the parameters'
    dtype, the update is computed in float32 and rounded into the parameter stochastically (up or
    down with the odds of its distance), so an update below the parameter's last bit survives on
    average instead of rounding away."""

    bf16_stochastic_round = True  # torchao's name for it: precision hygiene counts no update lost

    def __init__(self, params: Any, lr: float, weight_decay: float, decoupled: bool, seed: int,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.decoupled = decoupled
        self._seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                grad, value = p.grad.float(), p.float()
                if wd and self.decoupled:
                    value.mul_(1 - lr * wd)
                elif wd:
                    grad.add_(value, alpha=wd)
                m = state["exp_avg"].float().lerp_(grad, 1 - b1)
                v = state["exp_avg_sq"].float().mul_(b2).addcmul_(grad, grad, value=1 - b2)
                state["exp_avg"].copy_(m)
                state["exp_avg_sq"].copy_(v)
                denom = (v / (1 - b2 ** state["step"])).sqrt_().add_(eps)
                value.addcdiv_(m, denom, value=-lr / (1 - b1 ** state["step"]))
                self._round_into(p, value)
        return loss

    def _round_into(self, target: torch.Tensor, value: torch.Tensor) -> None:
        """`value` (float32) into bfloat16 `target`, rounded stochastically: random low 16 bits added,
        then cut (any other dtype: rounded to nearest)."""
        if target.dtype != torch.bfloat16:
            target.copy_(value)
            return
        gen = self._generators.get(value.device)
        if gen is None:
            gen = self._generators[value.device] = torch.Generator(value.device).manual_seed(self._seed)
        bits = value.view(torch.int32)
        noise = torch.randint(0, 1 << 16, bits.shape, generator=gen, device=bits.device, dtype=torch.int32)
        target.copy_(((bits + noise) & -65536).view(torch.float32))
