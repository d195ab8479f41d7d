"""The preset schema: every key of a preset, its type, its default and what it means.

A preset is a TOML file that states only what differs from these defaults (docs/presets.md lists
them); `config.build_config` validates a preset against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Iterator

from .precision import DTYPES, auto_dtype


@dataclass(frozen=True)
class Key:
    """One preset key: its type ("str", "int", "float", "bool", "auto|bool" or "auto|int"), default and doc."""

    type: str
    default: Any
    doc: str
    choices: Collection[str] | None = None
    minimum: float | None = None


class DtypeChoices:
    """amp.dtype's legal values: "auto" and every dtype of `precision.DTYPES`, read when asked, so
    a new dtype needs no edit here."""

    def __iter__(self) -> Iterator[str]:
        return iter(("auto", *DTYPES))

    def __contains__(self, value: object) -> bool:
        return value == "auto" or value in DTYPES

    def __len__(self) -> int:
        return 1 + len(DTYPES)

    def __repr__(self) -> str:
        return repr(tuple(self))


_SCALED = " or ".join(d.name for d in DTYPES.values() if d.needs_scaler)  # "float16"


SCHEMA: dict[str, dict[str, Key]] = {
    "run": {
        "name": Key("str", "", "Name shown in run lists; empty means the preset's name."),
        "description": Key("str", "", "One line on what this preset demonstrates."),
        "seed": Key("int", 0, "Seed for model init, data order and synthetic data.", minimum=0),
        "epochs": Key("int", 1, "Passes over the training set.", minimum=1),
        "max_steps": Key("int", 0, "Stop after this many optimizer steps (0 = no limit).", minimum=0),
        "device": Key("str", "auto", "Where to train; auto picks cuda when available.", ("auto", "cpu", "cuda")),
        "reuse_host_memory": Key("bool", True, "CPU runs: keep freed memory in the trainer for reuse (glibc malloc "
                                 "without mmap or trimming) instead of faulting in fresh pages every step; false "
                                 "keeps the system allocator's defaults, as a plain script has."),
        "compile": Key("bool", False, "Wrap the model in torch.compile (needs a working compiler; the first steps "
                       "pay the compilation)."),
        "script": Key("str", "", "Your own training script to launch instead of amptui's trainer (it writes "
                      "events with amptui.Monitor); empty means amptui's trainer."),
    },
    "model": {
        "name": Key("str", "smallcnn", "Architecture.", ("alexnet", "resnet18", "mlp", "smallcnn")),
        "num_classes": Key("int", 10, "Output classes of a classifier.", minimum=1),
        "pretrained": Key("bool", False, "Start from ImageNet weights found locally (alexnet, resnet18)."),
        "width": Key("int", 32, "smallcnn: channels of the first conv; mlp: features of every Linear.", minimum=1),
        "depth": Key("int", 3, "mlp: number of Linear layers.", minimum=1),
        "factory": Key("str", "", "Your own model: \"package.module:function\" returning an nn.Module; empty "
                       "means model.name."),
        "args": Key("table", {}, "Keyword arguments for model.factory (other keys of [model] that amptui does not "
                    "know are collected here too)."),
    },
    "data": {
        "name": Key("str", "synthetic", "Dataset: cifar10, an Intel-layout imagefolder, learnable synthetic "
                    "images, or the AMP recipe's random regression tensors.",
                    ("cifar10", "imagefolder", "synthetic", "random")),
        "root": Key("str", "data", "Folder holding the dataset files (relative to where amptui runs)."),
        "download": Key("bool", True, "cifar10: try to download when the files are missing."),
        "img_size": Key("int", 32, "Images are resized to img_size x img_size.", minimum=8),
        "batch_size": Key("int", 64, "Samples per micro-batch on each process.", minimum=1),
        "num_workers": Key("auto|int", "auto", "DataLoader worker processes; \"auto\": none for synthetic / "
                           "random data (made on the device), else min(8, CPU cores per process - 1).", minimum=0),
        "augment": Key("bool", False, "Random horizontal flips on training images."),
        "train_samples": Key("int", 2048, "synthetic / random: samples in the training set.", minimum=1),
        "val_samples": Key("int", 512, "synthetic / random: samples in the validation set (0 = none).", minimum=0),
        "factory": Key("str", "", "Your own data: \"package.module:function\" returning (train, validation) "
                       "datasets; empty means data.name."),
    },
    "optim": {
        "name": Key("str", "adamw", "Optimizer (fused kernels on CUDA).", ("adamw", "adam", "sgd")),
        "lr": Key("float", 1e-3, "Peak learning rate.", minimum=0.0),
        "weight_decay": Key("float", 0.0, "Weight decay.", minimum=0.0),
        "momentum": Key("float", 0.0, "sgd: momentum.", minimum=0.0),
    },
    "sched": {
        "name": Key("str", "none", "none; plateau on the mean epoch train loss; cosine per step with linear "
                    "warmup.", ("none", "plateau", "cosine")),
        "warmup_epochs": Key("float", 0.0, "cosine: epochs of linear warmup from lr/100 to lr.", minimum=0.0),
        "patience": Key("int", 3, "plateau: epochs without improvement before the lr drops.", minimum=0),
        "factor": Key("float", 0.1, "plateau: multiply the lr by this on a plateau.", minimum=0.0),
        "min_lr": Key("float", 0.0, "Lowest lr either schedule goes to.", minimum=0.0),
    },
    "amp": {
        "autocast": Key("bool", True, "Run forward and loss under torch.autocast."),
        "dtype": Key("str", "auto", f"Autocast dtype; auto is {auto_dtype('cuda')} on CUDA, "
                     f"{auto_dtype('cpu')} on CPU.", DtypeChoices()),
        "grad_scaler": Key("auto|bool", "auto", "torch.amp.GradScaler; auto means on exactly when autocast "
                           f"runs in {_SCALED}."),
        "init_scale": Key("float", 65536.0, "GradScaler: initial loss scale.", minimum=0.0),
        "growth_factor": Key("float", 2.0, "GradScaler: scale multiplier after growth_interval clean steps.",
                             minimum=1.0),
        "backoff_factor": Key("float", 0.5, "GradScaler: scale multiplier on inf/NaN (the step is skipped).",
                              minimum=0.0),
        "growth_interval": Key("int", 2000, "GradScaler: clean steps before the scale grows.", minimum=1),
        "clip_grad_norm": Key("float", 0.0, "Clip the gradient norm to this (0 = off); always after unscale_.",
                              minimum=0.0),
        "accumulate": Key("int", 1, "Micro-batches per optimizer step.", minimum=1),
    },
    "dist": {
        "mode": Key("str", "none", "none: one process; dp: nn.DataParallel; ddp: torchrun + DDP.",
                    ("none", "dp", "ddp")),
        "nproc_per_node": Key("int", 1, "ddp: processes per machine.", minimum=1),
        "nnodes": Key("int", 1, "ddp: machines taking part.", minimum=1),
        "node_rank": Key("int", 0, "ddp: this machine's index.", minimum=0),
        "rdzv_endpoint": Key("str", "127.0.0.1:29500", "ddp: HOST:PORT of the rendezvous."),
        "backend": Key("str", "auto", "ddp: process-group backend; auto is nccl on CUDA, gloo on CPU.",
                       ("auto", "nccl", "gloo")),
        "max_restarts": Key("int", 0, "ddp: torchrun restarts before the run fails.", minimum=0),
    },
    "log": {
        "every": Key("int", 10, "Optimizer steps between step records (metrics are read from the device "
                     "only then).", minimum=1),
        "checkpoint_every": Key("int", 1, "Epochs between checkpoints (0 = off).", minimum=0),
        "checkpoint_every_steps": Key("int", 0, "Optimizer steps between checkpoints (0 = off).", minimum=0),
        "eval_every": Key("int", 1, "Epochs between evaluations on the validation set (0 = never).", minimum=0),
        "tensorboard": Key("bool", False, "Also write TensorBoard scalars to RUN_DIR/tensorboard (needs the "
                           "amptui[tensorboard] extra)."),
    },
    "debug": {
        "inject_inf_every": Key("int", 0, "Poison the gradients with inf every N steps (0 = off).", minimum=0),
        "fail_at_step": Key("int", 0, "Raise an error at this optimizer step (0 = off).", minimum=0),
        "fail_rank": Key("int", 0, "The rank that raises at fail_at_step.", minimum=0),
        "slow_checkpoint_s": Key("float", 0.0, "Sleep this long in each checkpoint write (tests the timing "
                                 "windows; 0 = off).", minimum=0.0),
        "slow_eval_s": Key("float", 0.0, "Sleep this long in each evaluation (0 = off).", minimum=0.0),
    },
}


def defaults() -> dict[str, dict[str, Any]]:
    return {section: {name: key.default for name, key in keys.items()} for section, keys in SCHEMA.items()}

