"""What the loop trains with, built once by small functions and frozen: `TrainingState`.

`build_state` reads top to bottom as the set-up of the tutorials' loop -- seed, precision,
GradScaler, model, data, loss, optimizer, lr schedule -- plus what a dashboard needs: the FLOPs
of one step and the device's measured peak. Nothing here changes while the loop runs (the objects
inside do: parameters, optimizer state, the scale); what the loop counts lives in the Recorder's
counters, and what a checkpoint restores is loaded into these objects in place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from amptui.core.config.precision import Precision
from amptui.core.config.schema import AmpConfig, ModelConfig, RunConfig
from amptui.core.config.values import Config
from amptui.core.errors import UserError
from amptui.machine.peaks import peak_tflops
from amptui.telemetry.scaler import SkipLedger
from amptui.trainer import checkpoint, host_memory
from amptui.trainer.amp import Autocast
from amptui.trainer.data import BatchSource, build_train_val, choose_criterion
from amptui.trainer.dist import Dist, parallelize
from amptui.trainer.faults import Faults
from amptui.trainer.flops import count_step_flops
from amptui.trainer.layers import LayerScope, apply_autocast
from amptui.trainer.models import CNNS, build_model
from amptui.trainer.modes import Conversion, ModeRuntime, runtimes_for
from amptui.trainer.optim import Schedule, build_optimizer, implementation_line


@dataclass(frozen=True, eq=False)  # compared by identity: it holds the model, not values
class TrainingState:
    device: torch.device
    precision: Precision
    autocast: Autocast
    model: nn.Module                  # the plain model: optimized, checkpointed, FLOP-counted
    forward: nn.Module                # what the loop calls: the model or its DDP/DataParallel/compiled wrapper
    criterion: nn.Module
    scaler: torch.amp.GradScaler      # disabled (every call a no-op) without amp.grad_scaler
    skips: SkipLedger | None          # with a GradScaler: which steps it skipped, as the flags reach the host
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    train_data: BatchSource
    val_data: BatchSource | None
    steps_per_epoch: int              # optimizer steps (amp.accumulate micro-batches each)
    total_steps: int
    step_flops: int | None            # of one optimizer step; None when it could not be counted
    peak_tflops: float | None         # measured on rank 0 only
    faults: Faults                    # debug.*: fault injection for demos and tests
    # each precision mode's runtime this run uses (amptui/trainer/modes/), with what its conversion did
    conversions: tuple[tuple[ModeRuntime, Conversion | None], ...] = ()
    layers: dict[str, str] | None = None  # [amp.layers]: each layer (a module with parameters) -> its variant
    layer_dtypes: dict[str, str] | None = None  # [amp.layers]: module -> its compute dtype, where not the run's

    @property
    def sharded(self) -> bool:
        """FSDP: the model's parameters are this rank's shards; checkpoints gather them."""
        return self.precision.fsdp_policy is not None

    def on_device(self, x: torch.Tensor) -> torch.Tensor:
        """A batch of images in the memory layout the CNNs use on CUDA (channels_last)."""
        if self.device.type == "cuda" and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x


def build_state(cfg: Config, dist: Dist, device: torch.device, log: Callable[[str], None],
                precision: Precision | None = None) -> TrainingState:
    """Everything the loop needs, in the order that keeps a seeded run's numbers the same (`precision`:
    the config's for this device, computed once by the loop; a caller without one has it computed here)."""
    torch.manual_seed(cfg.run.seed)
    precision = precision or Precision.from_config(cfg, device.type)
    autocast = Autocast.of(precision, device)  # under FSDP a no-op: the policy applies instead
    scaler = build_scaler(cfg.amp, device, precision)
    model = build_model_on(cfg.model, device)
    train_data, val_data = build_train_val(cfg, dist.rank, dist.world_size, device)
    criterion = choose_criterion(cfg, train_data)
    steps_per_epoch, total_steps = count_steps(cfg, train_data.batches_per_epoch)
    step_flops = count_flops(model, criterion, train_data, autocast, cfg.amp.accumulate, log)  # unsharded
    scope = LayerScope.of(model, precision) if precision.layers else None
    runtimes = runtimes_for(precision, scope)
    unruled = unruled_layers(model, precision, cfg, device, scope, runtimes)
    # after the count: the same GEMMs, fewer bits
    conversions = tuple((r, r.convert(model, precision, cfg, device, scope)) for r in runtimes)
    layer_labels = layer_dtypes = None
    if scope is not None:
        converted = {name: v for _, done in conversions if done is not None for name, v in done.variants().items()}
        layer_labels, layer_dtypes = scope.labels(model, converted), scope.dtypes(model)
        precision = dataclasses.replace(precision, mix=scope.mix(model, unruled, converted))
        if precision.fsdp_policy is None:  # under FSDP each ruled module gets a policy of its own instead
            apply_autocast(model, scope, device)
    forward = parallelize(model, dist, device, autocast, cfg.run, cfg.dist.mode, precision, scope)
    # after FSDP: its parameters are the shards
    optimizer = next((o for r in runtimes if (o := r.optimizer(cfg, list(model.parameters()), precision)) is not None),
                     None) or build_optimizer(cfg, model.parameters(), fused=precision.fsdp_policy is None)
    log(implementation_line(optimizer))
    schedule = Schedule(cfg, optimizer, steps_per_epoch, total_steps)
    skips = SkipLedger(device, capacity=cfg.log.every + 1) if precision.scaler else None
    peak_tflops = measure_peak(device, getattr(torch, precision.reduced)) if dist.rank == 0 else None
    if device.type == "cuda":  # the FLOP count and the matmul measurement are not the run's memory
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    return TrainingState(device=device, precision=precision, autocast=autocast, model=model, forward=forward,
                         criterion=criterion, scaler=scaler, skips=skips, optimizer=optimizer, schedule=schedule,
                         train_data=train_data, val_data=val_data, steps_per_epoch=steps_per_epoch,
                         total_steps=total_steps, step_flops=step_flops, peak_tflops=peak_tflops,
                         faults=Faults.of(cfg.debug, dist.rank), conversions=conversions, layers=layer_labels,
                         layer_dtypes=layer_dtypes)


def unruled_layers(model: nn.Module, precision: Precision, cfg: Config, device: torch.device,
                   scope: LayerScope | None, runtimes: list[ModeRuntime]) -> dict[str, str]:
    """Each layer's variant as the run alone would give it (what [amp.layers] is counted against)."""
    if scope is None:
        return {}
    converts: dict[str, str] = {}
    for runtime in runtimes:
        converts.update(runtime.converts(model, precision, cfg, device))
    return scope.unruled_labels(model, converts)


def choose_device(run_cfg: RunConfig, local_rank: int, log: Callable[[str], None]) -> torch.device:
    """This rank's GPU (run.device = "cuda"), else the CPU -- set up to keep freed memory when
    `run.reuse_host_memory` asks (before the run allocates anything big)."""
    if run_cfg.device == "cuda":
        if not torch.cuda.is_available():
            raise UserError("this run was configured for CUDA but no CUDA GPU is usable here")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        return device
    if run_cfg.reuse_host_memory:
        log(host_memory.keep_freed_memory())
    return torch.device("cpu")


def build_scaler(amp_cfg: AmpConfig, device: torch.device, precision: Precision) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(
        device.type, init_scale=amp_cfg.init_scale, growth_factor=amp_cfg.growth_factor,
        backoff_factor=amp_cfg.backoff_factor, growth_interval=amp_cfg.growth_interval, enabled=precision.scaler)


def build_model_on(model_cfg: ModelConfig, device: torch.device) -> nn.Module:
    """The model on its device; the built-in CNNs' weights in channels_last on CUDA."""
    model = build_model(model_cfg).to(device)
    if device.type == "cuda" and model_cfg.name in CNNS and not model_cfg.factory:
        model = model.to(memory_format=torch.channels_last)
    return model


def count_steps(cfg: Config, batches_per_epoch: int) -> tuple[int, int]:
    """(optimizer steps per epoch, steps in the run): run.max_steps caps run.epochs."""
    steps_per_epoch = batches_per_epoch // cfg.amp.accumulate
    if steps_per_epoch < 1:
        raise UserError(f"amp.accumulate ({cfg.amp.accumulate}) is more than the {batches_per_epoch}"
                        " batches of an epoch; lower it or use more data")
    total = steps_per_epoch * cfg.run.epochs
    return steps_per_epoch, (min(total, cfg.run.max_steps) if cfg.run.max_steps else total)


def count_flops(model: nn.Module, criterion: nn.Module, train_data: BatchSource, autocast: Autocast,
                accumulate: int, log: Callable[[str], None]) -> int | None:
    """FLOPs of one optimizer step, counted once on a real batch (achieved TFLOP/s = this x
    steps / time). The batch is drawn with the RNG state saved and put back."""
    rng = checkpoint.rng_state()
    try:
        x, y = next(iter(train_data.batches(0)))
        flops = count_step_flops(model, criterion, x, y, autocast.device_type, autocast.dtype, autocast.enabled)
    except Exception as exc:  # an exotic op FlopCounterMode cannot follow: report no tflops
        log(f"FLOP count unavailable: {exc}")
        return None
    finally:
        checkpoint.set_rng_state(rng)
    return flops * accumulate


def measure_peak(device: torch.device, compute_dtype: torch.dtype) -> float:
    """The device's measured matmul TFLOP/s in the forward pass's dtype (cached per device model).
    One rank measures: ranks sharing a CPU would only slow each other down."""
    return peak_tflops(device, compute_dtype)
