"""The preset schema: one frozen dataclass per section, each field a key with its type, default
and meaning, in this one place.

A preset is a TOML file that states only what differs from these defaults (docs/presets.md lists
them); `config.build_config` validates a preset against them and builds a `config.Config` of
these sections. `SCHEMA` is the same table read by key ("amp.dtype" -> its `Key`) for the
parsers and the dashboard's choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Collection, Iterator, Literal, Mapping

from amptui.core import modes
from amptui.core.config.precision import DTYPES, auto_dtype
from amptui.core.modes.float8 import RECIPES as FLOAT8_RECIPES


@dataclass(frozen=True)
class Key:
    """One preset key: its type ("str", "int", "float", "bool", "auto|bool", "auto|int" or
    "table"), default and doc."""

    type: str
    default: Any
    doc: str
    choices: Collection[str] | None = None
    minimum: float | None = None


_TYPE_OF_DEFAULT = {bool: "bool", int: "int", float: "float", str: "str", dict: "table", list: "list"}
KEY = "amptui.key"  # where a section field keeps its Key (dataclasses.Field.metadata)


def key(default: Any, doc: str, choices: Collection[str] | None = None, *, minimum: float | None = None,
        type: str | None = None) -> Any:
    """A section field: its default, and its Key in the field's metadata. The type word follows the
    default's type unless named ("auto|bool", "auto|int")."""
    spec = Key(type or _TYPE_OF_DEFAULT[default.__class__], default, doc, choices, minimum)
    if isinstance(default, (dict, list)):  # a mutable default: every section gets its own
        return field(default_factory=default.__class__, metadata={KEY: spec})
    return field(default=default, metadata={KEY: spec})


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


class ModeChoices:
    """amp.mode's legal values: "auto" and every precision mode only its name picks, read from the
    registry when asked (amptui/core/modes/), so a new mode needs no edit here."""

    @staticmethod
    def _names() -> tuple[str, ...]:
        return ("auto", *(m.name for m in modes.MODES if m.chosen_by_name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


# run.apply_amp's values: "" (the script as written) and the autocast variants amptui can apply.
APPLIED_AMP = ("", *(n for d in DTYPES.values() for n in (d.short, d.short + "+scaler")))

_SCALED = " or ".join(d.name for d in DTYPES.values() if d.needs_scaler)  # "float16"


@dataclass(frozen=True)
class RunConfig:
    """[run]: what runs, for how long, where."""

    name: str = key("", "Name shown in run lists; empty means the preset's name.")
    description: str = key("", "One line on what this preset demonstrates.")
    seed: int = key(0, "Seed for model init, data order and synthetic data.", minimum=0)
    epochs: int = key(1, "Passes over the training set.", minimum=1)
    max_steps: int = key(0, "Stop after this many optimizer steps (0 = no limit).", minimum=0)
    device: str = key("auto", "Where to train; auto picks cuda when available.", ("auto", "cpu", "cuda"))
    reuse_host_memory: bool = key(True, "CPU runs: keep freed memory in the trainer for reuse (glibc malloc "
                                  "without mmap or trimming) instead of faulting in fresh pages every step; "
                                  "false keeps the system allocator's defaults, as a plain script has.")
    compile: bool = key(False, "Wrap the model in torch.compile (needs a working compiler; the first steps "
                        "pay the compilation).")
    script: str = key("", "Your own training script to launch instead of amptui's trainer (recorded "
                      "unmodified by amptui's hooks, or by its amptui.Monitor); empty means amptui's trainer. Set by "
                      "`amptui run --script` / -m: a preset that names one is refused.")
    apply_amp: str = key("", "A script run only: the precision amptui applies to the script's fp32 loop, "
                         "unmodified (autocast around its models' forward; with +scaler a GradScaler around its "
                         "backward, clip and optimizer step); empty leaves the script's precision its own. Set "
                         "by `amptui ab --script --variants`.", APPLIED_AMP)
    variant: str = key("", "A script run only: the NAME of `amptui ab --script --variant NAME='ARGS'` it ran as "
                       "(the script's own flags chose its precision); `amptui compare` names the run by it. Set by "
                       "`amptui ab --script`.")


@dataclass(frozen=True)
class ModelConfig:
    """[model]: the network. With model.factory set, keys of [model] that amptui does not know are
    the factory's keyword arguments: they are collected into `args`."""

    name: str = key("smallcnn", "Architecture (gpt: a small decoder-only transformer, for data.name = \"text\"; "
                    "planlab: an MLP with one linear fed outlier channels, for amptui plan).",
                    ("alexnet", "resnet18", "mlp", "smallcnn", "gpt", "planlab"))
    num_classes: int = key(10, "Output classes of a classifier.", minimum=1)
    pretrained: bool = key(False, "Start from ImageNet weights found locally (alexnet, resnet18).")
    width: int = key(32, "smallcnn: channels of the first conv; mlp, planlab: features of every Linear.", minimum=1)
    depth: int = key(3, "mlp, planlab: number of Linear layers.", minimum=1)
    n_layer: int = key(4, "gpt: transformer blocks.", minimum=1)
    n_head: int = key(4, "gpt: attention heads (n_embd must be a multiple).", minimum=1)
    n_embd: int = key(64, "gpt: embedding width.", minimum=1)
    block_size: int = key(64, "gpt: context length in tokens (bytes); text windows are this long.", minimum=1)
    ffn_gain: float = key(1.0, "gpt: block i's MLP weights start ffn_gain**i times larger (1 = GPT-2's init); "
                          "> 1 grows later blocks' feed-forward outputs past float16's range (numerics-lab).",
                          minimum=0.0)
    factory: str = key("", "Your own model: \"package.module:function\" returning an nn.Module; empty "
                       "means model.name.")
    args: Mapping[str, Any] = key({}, "Keyword arguments for model.factory (other keys of [model] that amptui "
                                  "does not know are collected here too).")


@dataclass(frozen=True)
class DataConfig:
    """[data]: the datasets and their loaders."""

    name: str = key("synthetic", "Dataset: cifar10, an Intel-layout imagefolder, learnable synthetic "
                    "images, the AMP recipe's random regression tensors, or byte-level text (model gpt).",
                    ("cifar10", "imagefolder", "synthetic", "random", "text"))
    root: str = key("data", "Folder holding the dataset files (relative to where amptui runs).")
    path: str = key("", "text: a text file or a folder of them; empty means Python's standard library "
                    "(the .py files beside the os module), found on every machine.")
    download: bool = key(True, "cifar10: try to download when the files are missing.")
    img_size: int = key(32, "Images are resized to img_size x img_size.", minimum=8)
    batch_size: int = key(64, "Samples per micro-batch on each process.", minimum=1)
    num_workers: int | Literal["auto"] = key(
        "auto", "DataLoader worker processes; \"auto\": none for synthetic / random data (made on the device), "
        "else min(8, CPU cores per process - 1).", minimum=0, type="auto|int")
    augment: bool = key(False, "Random horizontal flips on training images.")
    train_samples: int = key(2048, "synthetic / random: samples in the training set; text: windows per epoch.",
                             minimum=1)
    val_samples: int = key(512, "synthetic / random: samples in the validation set; text: validation windows "
                           "(0 = none).", minimum=0)
    factory: str = key("", "Your own data: \"package.module:function\" returning (train, validation) "
                       "datasets; empty means data.name.")


@dataclass(frozen=True)
class OptimConfig:
    """[optim]: the optimizer."""

    name: str = key("adamw", "Optimizer (fused kernels on CUDA).", ("adamw", "adam", "sgd"))
    lr: float = key(1e-3, "Peak learning rate.", minimum=0.0)
    weight_decay: float = key(0.0, "Weight decay.", minimum=0.0)
    momentum: float = key(0.0, "sgd: momentum.", minimum=0.0)


@dataclass(frozen=True)
class SchedConfig:
    """[sched]: the learning-rate schedule."""

    name: str = key("none", "none; plateau on the mean epoch train loss; cosine per step with linear warmup.",
                    ("none", "plateau", "cosine"))
    warmup_epochs: float = key(0.0, "cosine: epochs of linear warmup from lr/100 to lr.", minimum=0.0)
    patience: int = key(3, "plateau: epochs without improvement before the lr drops.", minimum=0)
    factor: float = key(0.1, "plateau: multiply the lr by this on a plateau.", minimum=0.0)
    min_lr: float = key(0.0, "Lowest lr either schedule goes to.", minimum=0.0)


@dataclass(frozen=True)
class AmpConfig:
    """[amp]: autocast, the GradScaler and the step around them."""

    autocast: bool = key(True, "Run forward and loss under torch.autocast.")
    dtype: str = key("auto", f"Autocast dtype; auto is {auto_dtype('cuda')} on CUDA, {auto_dtype('cpu')} on CPU "
                     "(float32, autocast off, where the CPU computes it slowly).",
                     DtypeChoices())
    grad_scaler: bool | Literal["auto"] = key(
        "auto", f"torch.amp.GradScaler; auto means on exactly when autocast runs in {_SCALED}.", type="auto|bool")
    mode: str = key("auto", "The precision mode: auto is the one amp.autocast, amp.tf32, amp.float8 and dist.mode "
                    "say; else a mode of its own, by name (`amptui ab --help` lists every mode's variants).",
                    ModeChoices())
    stochastic_round: bool = key(False, "amp.mode = \"pure\": the optimizer's update computed in float32 and rounded "
                                 "stochastically into the parameters' dtype, so an update smaller than their last "
                                 "bit survives on average (optim.name adamw or adam).")
    init_scale: float = key(65536.0, "GradScaler: initial loss scale.", minimum=0.0)
    growth_factor: float = key(2.0, "GradScaler: scale multiplier after growth_interval clean steps.", minimum=1.0)
    backoff_factor: float = key(0.5, "GradScaler: scale multiplier on inf/NaN (the step is skipped).", minimum=0.0)
    growth_interval: int = key(2000, "GradScaler: clean steps before the scale grows.", minimum=1)
    clip_grad_norm: float = key(0.0, "Clip the gradient norm to this (0 = off); always after unscale_.",
                                minimum=0.0)
    accumulate: int = key(1, "Micro-batches per optimizer step.", minimum=1)
    tf32: bool | Literal["auto"] = key(
        "auto", "TF32 tensor cores for float32 CUDA matmuls and cuDNN convolutions (Ampere or later); auto keeps "
        "torch's default (matmuls off, convolutions on); no effect on a CPU.", type="auto|bool")
    reduce_dtype: str = key("float32", "dist.mode = \"fsdp\": the dtype gradients are reduced (and kept) in across "
                            "ranks: float32, or the policy's compute dtype (amp.dtype).", ("float32", *DTYPES))
    float8: str = key("off", "float8 training through torchao (pip install 'amptui[fp8]'): the linears' GEMMs in "
                      "float8 with tensorwise or rowwise scales, or MXFP8 (a scale per 32 values), on top of autocast; "
                      "emulated where the hardware has no float8 GEMM (CPU, GPUs before compute capability 8.9).",
                      ("off", *FLOAT8_RECIPES))
    float8_skip: list[str] = key([], "amp.float8: names of linears kept in high precision (a name matches every "
                                 "module whose dotted name contains it, e.g. \"attn.proj\").")
    layers: Mapping[str, str] = key({}, "[amp.layers]: per-module precision, \"module-name pattern\" = \"variant\" "
                                    "(fnmatch on the names model.named_modules() gives; first match wins; a module no "
                                    "pattern matches runs as its parent, the model as the rest of [amp] says). Variants: "
                                    "fp32, fp16, bf16, fp8, fp8-rowwise, mxfp8. amptui's trainer only (not scripts).")
    autopilot: Mapping[str, Any] = key({}, "[amp.autopilot]: the precision autopilot, off by default: mode = "
                                       "\"advise\" (say what it would do) or \"act\" (switch precision at a checkpoint, "
                                       "exactly as a resume would), and each rule's thresholds (docs/autopilot.md).")


@dataclass(frozen=True)
class NumericsConfig:
    """[numerics]: per-layer range headroom, sampled on the device, and the first non-finite module."""

    every: int = key(0, "Optimizer steps between per-layer range samples (forward output and gradient abs-max "
                     "as headroom to the dtype's largest value, gradient underflow); 0 = off, costs nothing.",
                     minimum=0)
    depth: int = key(2, "Module depth sampled: 1 = the model's children, 2 = their children (a transformer's "
                     "blocks), ...; shallower leaf modules are sampled too.", minimum=1)
    trace_nonfinite: bool = key(False, "On a GradScaler's backoff (an inf/NaN gradient or loss: a skipped step), "
                                "re-run that batch once with hooks on every module (same RNG state) to name the first "
                                "module whose forward output or gradient held inf/NaN. Needs a GradScaler (without "
                                "one a step is not skipped, so not replayed: numerics.every names it when sampled).")
    hygiene_every: int = key(50, "Optimizer steps between precision-hygiene samples (updates lost to the "
                             "parameters' rounding, 16-bit master weights or moments under a mixed setup, linears "
                             "computing in another dtype than asked, an eps that vanishes, gradients still scaled or "
                             "unscaled twice, a float16 loss), each said once as a warning; 0 = off.", minimum=0)
    plan_every: int = key(0, "Optimizer steps between `amptui plan`'s per-layer probes (every linear's GEMM on the "
                          "same tensors in float32, bf16, fp16 and each float8 recipe); 0 = off, nothing hooked. "
                          "Set by `amptui plan`.", minimum=0)


@dataclass(frozen=True)
class DistConfig:
    """[dist]: one process, DataParallel, or DDP under torchrun."""

    mode: str = key("none", "none: one process; dp: nn.DataParallel; ddp: torchrun + DDP; fsdp: torchrun + FSDP2 "
                    "(fully_shard per block, amp.* as its MixedPrecisionPolicy).", ("none", "dp", "ddp", "fsdp"))
    nproc_per_node: int = key(1, "ddp: processes per machine.", minimum=1)
    nnodes: int = key(1, "ddp: machines taking part.", minimum=1)
    node_rank: int = key(0, "ddp: this machine's index.", minimum=0)
    rdzv_endpoint: str = key("127.0.0.1:29500", "ddp: HOST:PORT of the rendezvous.")
    backend: str = key("auto", "ddp: process-group backend; auto is nccl on CUDA, gloo on CPU.",
                       ("auto", "nccl", "gloo"))
    max_restarts: int = key(0, "ddp: torchrun restarts before the run fails.", minimum=0)


@dataclass(frozen=True)
class LogConfig:
    """[log]: how often the run records, checkpoints and evaluates."""

    every: int = key(10, "Optimizer steps between step records (metrics are read from the device only then).",
                     minimum=1)
    checkpoint_every: int = key(1, "Epochs between checkpoints (0 = off).", minimum=0)
    checkpoint_every_steps: int = key(0, "Optimizer steps between checkpoints (0 = off).", minimum=0)
    eval_every: int = key(1, "Epochs between evaluations on the validation set (0 = never).", minimum=0)
    tensorboard: bool = key(False, "Also write TensorBoard scalars to RUN_DIR/tensorboard (needs the "
                            "amptui[tensorboard] extra).")
    mlflow: bool = key(False, "Also log the step and epoch series, precision and config to MLflow (the tracking "
                       "URI MLFLOW_TRACKING_URI names; needs the amptui[mlflow] extra).")
    notify_url: str = key("", "A webhook (Slack, Discord, ntfy) told when the run fails or its loss ends "
                          "non-finite, and of precision switches: an https:// address or \"$VARIABLE\" naming "
                          "the environment variable that holds it (keeps the secret out of presets; \"\" = off).")


@dataclass(frozen=True)
class DebugConfig:
    """[debug]: faults injected on purpose, to see the dashboard and the records react."""

    inject_inf_every: int = key(0, "Poison the gradients with inf every N steps (0 = off).", minimum=0)
    fail_at_step: int = key(0, "Raise an error at this optimizer step (0 = off).", minimum=0)
    fail_rank: int = key(0, "The rank that raises at fail_at_step.", minimum=0)
    slow_checkpoint_s: float = key(0.0, "Sleep this long in each checkpoint write (tests the timing windows; "
                                   "0 = off).", minimum=0.0)
    slow_eval_s: float = key(0.0, "Sleep this long in each evaluation (0 = off).", minimum=0.0)


# The sections in preset order; `config.Config` has one field of each.
SECTIONS: dict[str, type] = {"run": RunConfig, "model": ModelConfig, "data": DataConfig, "optim": OptimConfig,
                             "sched": SchedConfig, "amp": AmpConfig, "numerics": NumericsConfig, "dist": DistConfig, "log": LogConfig,
                             "debug": DebugConfig}

SCHEMA: dict[str, dict[str, Key]] = {section: {f.name: f.metadata[KEY] for f in fields(cls)}
                                     for section, cls in SECTIONS.items()}


def defaults() -> dict[str, dict[str, Any]]:
    """Every key's default, as a fresh nested dict (a table default is a new dict each call)."""
    return {section: {name: dict(key.default) if isinstance(key.default, dict) else key.default
                      for name, key in keys.items()} for section, keys in SCHEMA.items()}
