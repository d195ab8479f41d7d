"""How long one training step of a config takes here, timed for real (`amptui ab`'s estimate).

A FLOP count over the measured matmul rate misleads badly on a CPU (a bfloat16 convolution can
run at a fraction of a percent of bfloat16's matmul rate), so the estimate times the model's own
forward, loss and backward in the config's precision: one step to warm up, one timed (a step
slower than SLOW_STEP_S is not repeated: that alone says the run is long)."""

from __future__ import annotations

import time

import torch

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.trainer.amp import Autocast
from amptui.trainer.data import build_train_val, choose_criterion
from amptui.trainer.state import build_model_on, count_steps

SLOW_STEP_S = 2.0


def time_step(cfg: Config) -> tuple[float, int]:
    """(seconds of one optimizer step, the run's steps) for a resolved config, on one process."""
    device = torch.device("cuda" if cfg.run.device == "cuda" else "cpu")
    precision = Precision.from_config(cfg, device.type)
    autocast = Autocast.of(precision, device)
    torch.manual_seed(cfg.run.seed)
    model = build_model_on(cfg.model, device)
    train, _ = build_train_val(cfg, 0, 1, device)
    criterion = choose_criterion(cfg, train)
    _, total = count_steps(cfg, train.batches_per_epoch)
    x, y = next(iter(train.batches(0)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

    def step() -> float:
        began = time.perf_counter()
        for _ in range(cfg.amp.accumulate):
            with autocast():
                loss = criterion(model(x), y)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - began

    first = step()
    return (first if first > SLOW_STEP_S else step()), total
