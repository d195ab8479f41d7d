"""Checks made before a run folder exists: the hardware asked for, the data, the weights.

Everything that would otherwise fail minutes into a run, or leave a half-made run behind,
fails here with one line that says where amptui looked and what to do. The trainer repeats
the same checks when it starts (a resumed run may find a different machine).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Mapping

from amptui.core.config import values as cfgmod
from amptui.core.config.modefacts import Asked, RunFacts
from amptui.core.config.precision import Precision
from amptui.core.config.resolve import auto_fallback_note, auto_overrides, wants_speed_facts
from amptui.core.errors import UserError
from amptui.core.prepare import textcorpus
from amptui.core.prepare.fsdp_checks import check_fsdp
from amptui.core.prepare.pretrained import WEIGHTS
from amptui.core.prepare.usercode import check_factories

CIFAR_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
               "test_batch", "batches.meta")
SYNTHETIC_HINT = "or --set data.name=synthetic to try amptui without it"


# Where a GPU's driver shows itself: a machine with none of these has no device torch could use,
# so "auto" means the CPU without importing torch (seconds: `run --detach` answers sooner).
GPU_DRIVER_PATHS = ("/dev/nvidia0", "/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


def device_type(requested: str) -> str:
    if requested == "cpu" or (requested == "auto" and not any(os.path.exists(p) for p in GPU_DRIVER_PATHS)):
        return "cpu"
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise UserError("run.device = \"cuda\" but this machine has no usable CUDA GPU "
                        f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); "
                        "use --set run.device=cpu (or auto)")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


# The machine layer's answer to "which reduced dtypes are slow on this device type, and why"
# (machine/dtype_speed.py; core cannot import it, so the launcher hands it in).
SlowDtypes = Callable[[str], Mapping[str, str]]


def resolve(cfg: cfgmod.Config, slow_dtypes: SlowDtypes | None = None,
            notes: list[str] | None = None) -> cfgmod.Config:
    """Refuse impossible setups; decide every "auto" for this machine. Returns the resolved config.
    `slow_dtypes` lets automatic precision fall back to float32 where its dtype is slow here; the
    line saying so is appended to `notes`."""
    # A script's own loop puts its tensors where it likes and its hooks record where: its start
    # imports no torch here (a second of a script's start-up), unless torchrun's world needs the GPUs.
    script_loop = bool(cfg.run.script) and cfg.run.device == "auto" and cfg.dist.mode not in cfgmod.TORCHRUN_MODES
    dev = "cpu" if script_loop else device_type(cfg.run.device)
    if cfg.dist.mode == "dp":
        import torch

        count = torch.cuda.device_count() if dev == "cuda" else 0
        if count < 2:
            raise UserError(f"dist.mode = \"dp\" (DataParallel) needs at least 2 GPUs; this machine has "
                            f"{count} usable on {dev}. Use dist.mode=none, or dist.mode=ddp for several "
                            "processes")
    if cfg.dist.mode in cfgmod.TORCHRUN_MODES and dev == "cuda":
        import torch

        count = torch.cuda.device_count()
        if cfg.dist.nproc_per_node > count:
            raise UserError(f"dist.nproc_per_node = {cfg.dist.nproc_per_node} but this machine has {count} "
                            f"CUDA GPU(s): one process per GPU; use --set dist.nproc_per_node={count}")
    slow = slow_dtypes(dev) if slow_dtypes and not cfg.run.script and wants_speed_facts(cfg, dev) else None
    note = auto_fallback_note(cfg, dev, slow)
    if note and notes is not None and not cfg.run.script:  # a script's own loop picks its precision:
        notes.append(note)                                   # --set amp.dtype would change nothing there
    overrides = {**auto_overrides(cfg, dev, slow), "data.num_workers": cfgmod.resolve_num_workers(cfg)}
    if script_loop:
        overrides["run.device"] = "auto"  # until its hooks see the device (and precision: not in config.toml yet)
    check_fsdp(cfg)
    check_precision(cfg)
    check_factories(cfg)
    check_tensorboard(cfg)
    check_mlflow(cfg)
    check_weights(cfg)
    check_epoch_size(cfg)
    check_data(cfg)  # last: it may download
    return cfg.with_overrides(overrides, source="resolved config")


def odd_combinations(cfg: cfgmod.Config, slow: Mapping[str, str] | None = None,
                     precision: Precision | None = None) -> list[str]:
    """Legal but surprising AMP setups: the run goes on, with a warning event for each. `slow`:
    {dtype: why} of the dtypes measured slow on this CPU (machine.dtype_speed, what doctor says),
    so advice never recommends a dtype measured slow here."""
    amp = cfg.amp
    dev = cfg.run.device
    notes = []
    if amp.layers and cfg.run.script:
        notes.append("[amp.layers] applies to amptui's trainer only: a script's loop (its hooks, or the AMP amptui "
                     "applies to it) runs every module in the script's precision")
    precision = precision or Precision.from_config(cfg)  # the trainer's own, for its device (else run.device's)
    notes += [note.text for note in precision.mode.warnings(precision, run_facts(cfg, slow))]  # the mode's rules
    if cfg.debug.inject_inf_every and not amp.grad_scaler:
        notes.append("debug.inject_inf_every without a GradScaler: nothing skips the poisoned steps, so the "
                     "weights turn inf/NaN; add --set amp.grad_scaler=true to watch the scaler handle it")
    if amp.tf32 is True and dev == "cpu":
        notes.append("amp.tf32 = true on the CPU: TF32 is a CUDA tensor-core mode, so float32 runs as usual here")
    return notes


def run_facts(cfg: cfgmod.Config, slow: Mapping[str, str] | None = None) -> RunFacts:
    """What a precision mode is told of a run beyond its precision (its warnings and refusals)."""
    return RunFacts(device=cfg.run.device, dist=cfg.dist.mode, script=bool(cfg.run.script), slow=slow)


def check_precision(cfg: cfgmod.Config) -> None:
    """What the run's precision mode, and each [amp.layers] rule's, refuses of this run (a package
    it needs missing, a dist.mode or a dtype it cannot train with)."""
    run = run_facts(cfg)
    precision = Precision.from_config(cfg)
    asked: list[tuple[Precision, Asked | None]] = [(precision, None)]
    asked += [(Precision.from_variant(variant), Asked(f"amp.layers.\"{pattern}\" = \"{variant}\""))
              for pattern, variant in cfg.amp.layers.items()]
    for p, rule in asked:
        if why := p.mode.refusal(p, run, rule):
            raise UserError(why)


def check_tensorboard(cfg: cfgmod.Config) -> None:
    import importlib.util

    if cfg.log.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise UserError("log.tensorboard = true needs TensorBoard, which is not installed: "
                        "pip install 'amptui[tensorboard]' (or --set log.tensorboard=false)")


def check_mlflow(cfg: cfgmod.Config) -> None:
    import importlib.util

    if cfg.log.mlflow and importlib.util.find_spec("mlflow") is None:
        raise UserError("log.mlflow = true needs MLflow, which is not installed: pip install 'amptui[mlflow]' "
                        "(or --set log.mlflow=false)")


def check_epoch_size(cfg: cfgmod.Config) -> None:
    """amp.accumulate must fit in an epoch (known up front for synthetic, random and CIFAR-10 data)."""
    data, amp = cfg.data, cfg.amp
    if data.factory:
        return
    samples = {"synthetic": data.train_samples, "random": data.train_samples, "cifar10": 50_000}.get(data.name)
    if samples is None:
        return
    per_rank = -(-samples // cfgmod.world_size(cfg))
    batches = max(1, data.train_samples // data.batch_size) if data.name == "random" else \
        -(-per_rank // data.batch_size)
    if amp.accumulate > batches:
        raise UserError(f"amp.accumulate ({amp.accumulate}) is more than the {batches} batches of an epoch; "
                        "lower it, or use more data or smaller batches")


# --- data ----------------------------------------------------------------------------------------

def imagefolder_dirs(root: Path) -> tuple[Path, Path] | None:
    """The Intel Image Classification layout: seg_train/ and seg_test/ (Kaggle nests them once more)."""
    for base in (root,):
        train, test = base / "seg_train", base / "seg_test"
        if (train / "seg_train").is_dir():
            train = train / "seg_train"
        if (test / "seg_test").is_dir():
            test = test / "seg_test"
        if train.is_dir() and test.is_dir():
            return train, test
    return None


def imagefolder_found(root: Path) -> tuple[Path, Path]:
    """`imagefolder_dirs`, or a UserError saying where it looked."""
    dirs = imagefolder_dirs(root)
    if dirs is None:
        raise UserError(f"image folder not found: looked for {root}/seg_train/<class>/ and "
                        f"{root}/seg_test/<class>/ (Intel Image Classification layout); set data.root, "
                        f"{SYNTHETIC_HINT}")
    return dirs


def check_data(cfg: cfgmod.Config) -> None:
    data = cfg.data
    if data.factory:
        return  # the user's factory finds its own data
    root = Path(data.root).expanduser()
    if data.name == "cifar10":
        folder = root / "cifar-10-batches-py"
        missing = [f for f in CIFAR_FILES if not (folder / f).is_file()]
        if not missing:
            return
        if not data.download:
            raise UserError(f"CIFAR-10 not found: looked in {folder} (missing {', '.join(missing)}); put the "
                            f"python version of CIFAR-10 there, set data.download=true, {SYNTHETIC_HINT}")
        _download_cifar10(root, folder)
    elif data.name == "imagefolder":
        dirs = imagefolder_found(root)
        for split in dirs:
            classes = [p for p in split.iterdir() if p.is_dir()]
            if not classes:
                raise UserError(f"image folder {split} has no class subfolders; expected {split}/<class>/*.jpg")
        n_classes = len([p for p in dirs[0].iterdir() if p.is_dir()])
        if n_classes != cfg.model.num_classes:
            raise UserError(f"{dirs[0]} has {n_classes} classes but model.num_classes = "
                            f"{cfg.model.num_classes}; --set model.num_classes={n_classes}")
    elif data.name == "text":
        textcorpus.check(data.path, cfg.model.block_size)


def _download_cifar10(root: Path, folder: Path) -> None:
    created = not root.exists()
    try:
        from torchvision.datasets import CIFAR10

        CIFAR10(str(root), train=True, download=True)
    except Exception as exc:  # no network, proxy, disk: all the same to the user
        if created:
            shutil.rmtree(root, ignore_errors=True)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"CIFAR-10 not found in {folder} and the download failed ({reason}); put the python "
                        f"version of CIFAR-10 (cifar-10-python.tar.gz, extracted) there, {SYNTHETIC_HINT}"
                        ) from None


# --- weights -------------------------------------------------------------------------------------

def pretrained_weights_path(model_name: str) -> Path:
    """Where torchvision keeps ImageNet weights: $TORCH_HOME/hub/checkpoints/<file from the URL>."""
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints" / WEIGHTS[model_name].file


def check_weights(cfg: cfgmod.Config) -> None:
    model = cfg.model
    if not model.pretrained:
        return
    path = pretrained_weights_path(model.name)
    if not path.is_file():
        raise UserError(f"ImageNet weights for {model.name} not found at {path}; copy them there from a "
                        "machine with internet, or --set model.pretrained=false to train from scratch")
