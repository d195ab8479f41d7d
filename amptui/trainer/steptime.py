"""How long a run of a config takes here, timed for real (`amptui ab`'s estimate).

A FLOP count over the measured matmul rate misleads badly on a CPU (a bfloat16 convolution can
run at a fraction of a percent of bfloat16's matmul rate), so the estimate times the model's own
forward, loss and backward in the config's precision: one step to warm up, then up to TIMED_STEPS
more within TIMING_BUDGET_S (a step slower than that alone says the run is long), one validation
batch, and what building the model and data took (each run of an A/B builds them again)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from amptui.core.config.precision import Precision
from amptui.core.config.values import Config
from amptui.trainer.amp import Autocast
from amptui.trainer.data import build_train_val, choose_criterion
from amptui.trainer.state import build_model_on, count_steps

TIMED_STEPS = 5       # steady steps timed after the warm-up one, at most
TIMING_BUDGET_S = 3.0  # ... and no more steps once this much time went into them


@dataclass
class Timing:
    steps: int              # the run's optimizer steps
    step_s: list[float]     # the timed steady steps (at least one)
    first_s: float          # the warm-up step
    setup_s: float          # building the model and the data
    eval_s: float           # one evaluation over the validation set (0: the run evaluates nothing)
    evals: int              # evaluations in the run


def time_steps(cfg: Config) -> Timing:
    """The timings of a resolved config's run, measured on one process."""
    began = time.perf_counter()
    device = torch.device("cuda" if cfg.run.device == "cuda" else "cpu")
    precision = Precision.from_config(cfg, device.type)
    autocast = Autocast.of(precision, device)
    torch.manual_seed(cfg.run.seed)
    model = build_model_on(cfg.model, device)
    train, val = build_train_val(cfg, 0, 1, device)
    criterion = choose_criterion(cfg, train)
    per_epoch, total = count_steps(cfg, train.batches_per_epoch)
    x, y = next(iter(train.batches(0)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    setup_s = time.perf_counter() - began

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step() -> float:
        began = time.perf_counter()
        for _ in range(cfg.amp.accumulate):
            with autocast():
                loss = criterion(model(x), y)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        return time.perf_counter() - began

    first = step()
    timed = [step()]
    while len(timed) < TIMED_STEPS and sum(timed) + timed[-1] < TIMING_BUDGET_S:
        timed.append(step())
    epochs = math.ceil(total / per_epoch)
    evals = (epochs // cfg.log.eval_every + (1 if epochs % cfg.log.eval_every else 0)) \
        if cfg.log.eval_every and val is not None else 0
    eval_s = 0.0
    if evals and val is not None:
        vx, _ = next(iter(val.batches(0)))
        began = time.perf_counter()
        with torch.no_grad(), autocast():
            model(vx)
        sync()
        eval_s = (time.perf_counter() - began) * val.batches_per_epoch
    return Timing(steps=total, step_s=timed, first_s=first, setup_s=setup_s, eval_s=eval_s, evals=evals)
