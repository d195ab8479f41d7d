"""Datasets and the batches the loop consumes.

Every source yields the same thing: `batches(epoch, start)` gives the batches of one epoch for
this rank, on the training device, in an order fixed by (seed, epoch), starting at batch `start`,
so a run resumed mid-epoch sees exactly the batches it had not seen yet. The loop's Recorder
times that iterator (telemetry.meter.TimedBatches: the host seconds blocked getting the next
batch, no device sync), the one count of data wait.

`synthetic` and `random` data are made on the device itself (no per-sample CPU work, no copy);
datasets read from disk go through a DataLoader with pinned memory, and on CUDA the next batch is
copied on a side stream while the current step runs.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
from pathlib import Path
from typing import Any, Iterator, Protocol

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from amptui.core.config.schema import DataConfig
from amptui.core.config.values import Config, resolve_num_workers
from amptui.core.errors import UserError
from amptui.core.prepare import preflight, usercode
from amptui.trainer.devicebatches import DeviceBatches
from amptui.trainer.gpt import NextTokenLoss
from amptui.trainer.textdata import build_text_batches

# torchvision checks CIFAR-10's md5 sums. Tests write a tiny CIFAR-10 in the real format, which
# cannot match them; this variable skips only that check (nothing else about the format).
SKIP_CIFAR_MD5_ENV = "AMPTUI_SKIP_CIFAR_MD5"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class BatchSource(Protocol):
    """What the loop asks of its data: how many batches an epoch holds, and an epoch's batches."""

    @property
    def batches_per_epoch(self) -> int: ...

    def batches(self, epoch: int, start: int = 0) -> Iterator: ...


class SyntheticBatches(DeviceBatches):
    """Learnable images made on the training device a batch at a time: each class is a fixed smooth
    pattern, each sample that pattern plus noise. Batch b of epoch e is deterministic per (seed,
    split, rank, e, b) and device type; no CPU work per sample, no copy, no memory held per sample."""

    def __init__(self, cfg: Config, rank: int, world_size: int, device: torch.device, split: str = "train"):
        super().__init__(cfg, rank, world_size, device, split)
        self.img_size, self.num_classes = cfg.data.img_size, cfg.model.num_classes
        g = torch.Generator().manual_seed(cfg.run.seed)
        coarse = torch.randn(self.num_classes, 3, 4, 4, generator=g)
        templates = torch.nn.functional.interpolate(coarse, size=(self.img_size, self.img_size), mode="bilinear",
                                                    align_corners=False)
        self.templates = (0.2 * templates).to(device)
        # CNNs train channels_last on CUDA: make the batch in that layout (the loop's conversion is free).
        self.layout = torch.channels_last if device.type == "cuda" else torch.contiguous_format

    def batch(self, epoch: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.seeded(epoch, index)
        labels = torch.randint(self.num_classes, (n,), generator=self.generator, device=self.device)
        x = torch.empty((n, 3, self.img_size, self.img_size), device=self.device, memory_format=self.layout)
        x.normal_(generator=self.generator)
        return x.add_(self.templates[labels]), labels


class _CIFAR10NoMD5:
    """Mixin for torchvision's CIFAR10 that skips the md5 comparison only (see SKIP_CIFAR_MD5_ENV)."""

    # set by CIFAR10, which this is mixed into
    root: str
    base_folder: str
    train_list: list[list[str]]
    test_list: list[list[str]]
    meta: dict[str, str]
    classes: list[str]
    class_to_idx: dict[str, int]

    def _check_integrity(self) -> bool:
        folder = Path(self.root) / self.base_folder
        return all((folder / name).is_file() for name, _ in self.train_list + self.test_list)

    def _load_meta(self) -> None:
        with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as fh:
            data = pickle.load(fh, encoding="latin1")
        self.classes = data[self.meta["key"]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}


def _image_transforms(data_cfg: DataConfig, mean, std, train: bool):
    from torchvision import transforms as T

    steps = [T.Resize((data_cfg.img_size, data_cfg.img_size))]
    if train and data_cfg.augment:
        steps.append(T.RandomHorizontalFlip())
    steps += [T.ToTensor(), T.Normalize(mean, std)]
    return T.Compose(steps)


def build_datasets(cfg: Config) -> tuple[Dataset, Dataset | None]:
    """(train, validation) datasets on disk or from `data.factory`; `synthetic` and `random` are made
    on the device by SyntheticBatches and RandomBatches."""
    data = cfg.data
    if data.factory:
        return build_user_datasets(cfg)
    if data.name == "cifar10":
        from torchvision.datasets import CIFAR10

        cls = CIFAR10
        if os.environ.get(SKIP_CIFAR_MD5_ENV) == "1":
            cls = type("CIFAR10NoMD5", (_CIFAR10NoMD5, CIFAR10), {})
        root = str(Path(data.root).expanduser())
        train = cls(root, train=True, download=False, transform=_image_transforms(data, CIFAR_MEAN, CIFAR_STD, True))
        val = cls(root, train=False, download=False, transform=_image_transforms(data, CIFAR_MEAN, CIFAR_STD, False))
        return train, val
    if data.name == "imagefolder":
        from torchvision.datasets import ImageFolder

        train_dir, test_dir = preflight.imagefolder_found(Path(data.root).expanduser())
        train = ImageFolder(str(train_dir), transform=_image_transforms(data, IMAGENET_MEAN, IMAGENET_STD, True))
        val = ImageFolder(str(test_dir), transform=_image_transforms(data, IMAGENET_MEAN, IMAGENET_STD, False))
        return train, val
    raise ValueError(f"unknown dataset {data.name!r}")


def build_user_datasets(cfg: Config) -> tuple[Dataset, Dataset | None]:
    """`data.factory = "package.module:function"` returning (train, validation) map-style datasets
    (validation may be None). The function gets those of root, img_size, augment, train_samples,
    val_samples, seed and num_classes that it names as parameters. Failures are UserErrors."""
    ref, key = cfg.data.factory, "data.factory"
    fn = usercode.load_factory(ref, key)
    settings = {"root": str(Path(cfg.data.root).expanduser()), "img_size": cfg.data.img_size,
                "augment": cfg.data.augment, "train_samples": cfg.data.train_samples,
                "val_samples": cfg.data.val_samples, "seed": cfg.run.seed, "num_classes": cfg.model.num_classes}
    result = usercode.call_factory(fn, ref, key, usercode.data_kwargs(fn, settings))
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else \
            type(result).__name__
        raise UserError(f'{key} = "{ref}" returned {got}; it must return (train, validation) datasets '
                        "(validation may be None)")
    train, val = result
    for what, ds in (("train", train), ("validation", val)):
        if ds is None and what == "validation":
            continue
        if isinstance(ds, torch.utils.data.IterableDataset) or not (hasattr(ds, "__len__")
                                                                    and hasattr(ds, "__getitem__")):
            raise UserError(f'{key} = "{ref}" returned a {what} set of type {type(ds).__name__}; amptui needs '
                            "map-style datasets (with __len__ and __getitem__)")
        if len(ds) == 0:
            raise UserError(f'{key} = "{ref}" returned an empty {what} set')
    return train, val


def _target_of(sample):
    if isinstance(sample, dict) or not isinstance(sample, (tuple, list)) or len(sample) != 2:
        return None
    return sample[1]


def choose_criterion(cfg: Config, train) -> torch.nn.Module:
    """The loss for this run's data: MSE for the recipe's random regression tensors and for float
    targets of a `data.factory`; CrossEntropy for integer class labels. `train` is what
    `build_train_val` returned for training. Looks at one sample (factories only)."""
    if isinstance(train, RandomBatches):
        return torch.nn.MSELoss()
    if cfg.data.name == "text" and not cfg.data.factory:
        return NextTokenLoss()
    if not cfg.data.factory:
        return torch.nn.CrossEntropyLoss()
    dataset = train.loader.dataset if isinstance(train, TrainData) else train
    ref = cfg.data.factory
    try:
        sample = dataset[0]
    except Exception as exc:
        raise UserError(f'data.factory = "{ref}": reading sample 0 of its train set raised '
                        f"{type(exc).__name__}: {exc}") from None
    target = _target_of(sample)
    if target is None:
        raise UserError(f'data.factory = "{ref}": samples must be (input, target) pairs, got '
                        f"{type(sample).__name__}")
    if isinstance(target, bool) or isinstance(target, int):
        return torch.nn.CrossEntropyLoss()
    if isinstance(target, float):
        return torch.nn.MSELoss()
    if isinstance(target, torch.Tensor):
        if target.dtype.is_floating_point:
            return torch.nn.MSELoss()
        if not target.dtype.is_complex and target.dtype != torch.bool:
            return torch.nn.CrossEntropyLoss()
    raise UserError(f'data.factory = "{ref}": targets must be integer class labels (CrossEntropy) or float '
                    f"tensors (MSE), got {type(target).__name__}"
                    + (f" of {target.dtype}" if isinstance(target, torch.Tensor) else ""))


class ResumableSampler(DistributedSampler):
    """DistributedSampler (seeded shuffle, one shard per rank, `set_epoch`) that can start mid-epoch."""

    def __init__(self, dataset, num_replicas: int, rank: int, shuffle: bool, seed: int):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed,
                         drop_last=False)
        self.start_index = 0

    def __iter__(self):
        return itertools.islice(super().__iter__(), self.start_index, None)

    def __len__(self) -> int:
        return max(0, self.num_samples - self.start_index)


def to_device(batch: Any, device: torch.device) -> Any:
    """Tensors of a batch (nested in tuples, lists, dicts) onto `device`, asynchronously from pinned memory."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def _record_stream(batch: Any, stream) -> None:
    """Tell the caching allocator that `stream` uses these tensors (made on another stream)."""
    if isinstance(batch, torch.Tensor):
        batch.record_stream(stream)
    elif isinstance(batch, (tuple, list)):
        for b in batch:
            _record_stream(b, stream)
    elif isinstance(batch, dict):
        for b in batch.values():
            _record_stream(b, stream)


def prefetch_to_device(batches: Iterator, device: torch.device) -> Iterator:
    """The loader's batches, in order, on `device`. On CUDA the copy of batch k+1 is issued on a side
    stream when batch k is handed out, so it overlaps step k; the compute stream waits for the copy
    on the GPU (wait_stream), never the host. Elsewhere the batches pass through."""
    if device.type != "cuda":
        yield from (to_device(b, device) for b in batches)
        return
    side = torch.cuda.Stream(device)

    def load():
        batch = next(batches, None)
        if batch is None:
            return None
        with torch.cuda.stream(side):
            return to_device(batch, device)

    ready = load()
    while ready is not None:
        compute = torch.cuda.current_stream(device)
        compute.wait_stream(side)
        _record_stream(ready, compute)
        current, ready = ready, load()
        yield current


def default_num_workers(cfg: Config) -> int:
    """`data.num_workers` as an int: an explicit number, or "auto" decided for this machine."""
    return resolve_num_workers(cfg)


class TrainData:
    """Batches from a map-style dataset through a DataLoader (pinned memory and a device prefetch on CUDA)."""

    def __init__(self, dataset: Dataset, cfg: Config, rank: int, world_size: int, device: torch.device, shuffle: bool):
        self.batch_size = cfg.data.batch_size
        self.sampler = ResumableSampler(dataset, world_size, rank, shuffle, cfg.run.seed)
        self.device = device
        workers = default_num_workers(cfg)
        self.loader = DataLoader(dataset, batch_size=self.batch_size, sampler=self.sampler,
                                 num_workers=workers, pin_memory=device.type == "cuda",
                                 persistent_workers=workers > 0, drop_last=False)

    @property
    def batches_per_epoch(self) -> int:
        return math.ceil(self.sampler.num_samples / self.batch_size)

    def batches(self, epoch: int, start: int = 0) -> Iterator:
        self.sampler.set_epoch(epoch)
        self.sampler.start_index = start * self.batch_size
        return prefetch_to_device(iter(self.loader), self.device)


class RandomBatches:
    """The AMP recipe's data: fixed batches of random inputs and targets made once on the device and
    reused every epoch (as the recipe does), so the timing measures the model, not a data pipeline."""

    def __init__(self, cfg: Config, rank: int, device: torch.device, split: str = "train"):
        n = cfg.data.train_samples if split == "train" else cfg.data.val_samples
        self.batch_size = cfg.data.batch_size
        self.num_batches = max(1, n // self.batch_size)
        self.width, self.device = cfg.model.width, device
        self.seed = cfg.run.seed * 7919 + rank * 104_729 + (0 if split == "train" else 1)
        self._data: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return self.num_batches

    def _make(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        # Drawn on the device itself: no host-side generation or copy of the whole set at start-up.
        g = torch.Generator(device=self.device).manual_seed(self.seed)
        shape = (self.batch_size, self.width)
        return [(torch.randn(shape, generator=g, device=self.device),
                 torch.randn(shape, generator=g, device=self.device)) for _ in range(self.num_batches)]

    def batches(self, epoch: int, start: int = 0) -> Iterator:
        if self._data is None:
            self._data = self._make()
        return iter(self._data[start:])


def build_train_val(cfg: Config, rank: int, world_size: int, device: torch.device):
    """(train batches, validation batches or None) for this rank."""
    on_device = {"random": lambda split: RandomBatches(cfg, rank, device, split),
                 "synthetic": lambda split: SyntheticBatches(cfg, rank, world_size, device, split)}
    if cfg.data.name in on_device and not cfg.data.factory:
        make = on_device[cfg.data.name]
        enough = cfg.data.val_samples >= (cfg.data.batch_size if cfg.data.name == "random" else 1)
        return make("train"), (make("val") if enough else None)
    if cfg.data.name == "text" and not cfg.data.factory:
        return build_text_batches(cfg, rank, world_size, device)
    train_ds, val_ds = build_datasets(cfg)
    train = TrainData(train_ds, cfg, rank, world_size, device, shuffle=True)
    val = TrainData(val_ds, cfg, rank, world_size, device, shuffle=False) if val_ds is not None else None
    return train, val
