"""Datasets and the batches the loop consumes.

Every source yields the same thing: `TrainData.batches(epoch, start)` gives the batches of one
epoch for this rank, in an order fixed by (seed, epoch), starting at batch `start`, so a run
resumed mid-epoch sees exactly the batches it had not seen yet.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
from pathlib import Path
from typing import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ..core import preflight

# torchvision checks CIFAR-10's md5 sums. Tests write a tiny CIFAR-10 in the real format, which
# cannot match them; this variable skips only that check (nothing else about the format).
SKIP_CIFAR_MD5_ENV = "AMPTUI_SKIP_CIFAR_MD5"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class SyntheticImages(Dataset):
    """Learnable images: each class is a fixed smooth pattern, each sample that pattern plus noise.

    Deterministic per (seed, split, index) and generated on the fly, so any size costs no memory.
    """

    def __init__(self, size: int, num_classes: int, img_size: int, seed: int, split: str):
        self.size, self.num_classes, self.img_size = size, num_classes, img_size
        self.seed = seed * 1_000_003 + (0 if split == "train" else 500_000_000)
        g = torch.Generator().manual_seed(seed)
        coarse = torch.randn(num_classes, 3, 4, 4, generator=g)
        self.templates = torch.nn.functional.interpolate(coarse, size=(img_size, img_size), mode="bilinear",
                                                         align_corners=False)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        g = torch.Generator().manual_seed(self.seed + index)
        label = int(torch.randint(self.num_classes, (1,), generator=g))
        noise = torch.randn(3, self.img_size, self.img_size, generator=g)
        return 0.2 * self.templates[label] + noise, label


class _CIFAR10NoMD5:
    """Mixin for torchvision's CIFAR10 that skips the md5 comparison only (see SKIP_CIFAR_MD5_ENV)."""

    def _check_integrity(self) -> bool:
        folder = Path(self.root) / self.base_folder
        return all((folder / name).is_file() for name, _ in self.train_list + self.test_list)

    def _load_meta(self) -> None:
        with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as fh:
            data = pickle.load(fh, encoding="latin1")
        self.classes = data[self.meta["key"]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}


def _image_transforms(data_cfg, mean, std, train: bool):
    from torchvision import transforms as T

    steps = [T.Resize((data_cfg.img_size, data_cfg.img_size))]
    if train and data_cfg.augment:
        steps.append(T.RandomHorizontalFlip())
    steps += [T.ToTensor(), T.Normalize(mean, std)]
    return T.Compose(steps)


def build_datasets(cfg) -> tuple[Dataset, Dataset | None]:
    """(train, validation) for classifier data or `data.factory`; `random` is handled by RandomBatches."""
    data, model = cfg.data, cfg.model
    if getattr(data, "factory", ""):
        return build_user_datasets(cfg)
    if data.name == "synthetic":
        val = SyntheticImages(data.val_samples, model.num_classes, data.img_size, cfg.run.seed, "val")
        train = SyntheticImages(data.train_samples, model.num_classes, data.img_size, cfg.run.seed, "train")
        return train, (val if data.val_samples else None)
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

        train_dir, test_dir = preflight.imagefolder_dirs(Path(data.root).expanduser())
        train = ImageFolder(str(train_dir), transform=_image_transforms(data, IMAGENET_MEAN, IMAGENET_STD, True))
        val = ImageFolder(str(test_dir), transform=_image_transforms(data, IMAGENET_MEAN, IMAGENET_STD, False))
        return train, val
    raise ValueError(f"unknown dataset {data.name!r}")


def build_user_datasets(cfg) -> tuple[Dataset, Dataset | None]:
    """`data.factory = "package.module:function"` returning (train, validation) map-style datasets
    (validation may be None). The function gets those of root, img_size, augment, train_samples,
    val_samples, seed and num_classes that it names as parameters. Failures are UserErrors."""
    from ..core import usercode
    from ..core.errors import UserError

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


def choose_criterion(cfg, train) -> torch.nn.Module:
    """The loss for this run's data: MSE for the recipe's random regression tensors and for float
    targets of a `data.factory`; CrossEntropy for integer class labels. `train` is what
    `build_train_val` returned for training. Looks at one sample (factories only)."""
    from ..core.errors import UserError

    if isinstance(train, RandomBatches):
        return torch.nn.MSELoss()
    if not getattr(cfg.data, "factory", ""):
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


class TrainData:
    """Batches from a map-style dataset through a DataLoader."""

    def __init__(self, dataset: Dataset, cfg, rank: int, world_size: int, device: torch.device, shuffle: bool):
        self.batch_size = cfg.data.batch_size
        self.sampler = ResumableSampler(dataset, world_size, rank, shuffle, cfg.run.seed)
        self.device = device
        self.loader = DataLoader(dataset, batch_size=self.batch_size, sampler=self.sampler,
                                 num_workers=cfg.data.num_workers, pin_memory=device.type == "cuda",
                                 persistent_workers=cfg.data.num_workers > 0, drop_last=False)

    @property
    def batches_per_epoch(self) -> int:
        return math.ceil(self.sampler.num_samples / self.batch_size)

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.sampler.set_epoch(epoch)
        self.sampler.start_index = start * self.batch_size
        for x, y in self.loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


class RandomBatches:
    """The AMP recipe's data: fixed batches of random inputs and targets made once on the device and
    reused every epoch (as the recipe does), so the timing measures the model, not a data pipeline."""

    def __init__(self, cfg, rank: int, device: torch.device, split: str = "train"):
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
        g = torch.Generator(device="cpu").manual_seed(self.seed)
        shape = (self.batch_size, self.width)
        return [(torch.randn(shape, generator=g).to(self.device), torch.randn(shape, generator=g).to(self.device))
                for _ in range(self.num_batches)]

    def batches(self, epoch: int, start: int = 0):
        if self._data is None:
            self._data = self._make()
        yield from self._data[start:]


def build_train_val(cfg, rank: int, world_size: int, device: torch.device):
    """(train batches, validation batches or None) for this rank."""
    if cfg.data.name == "random" and not getattr(cfg.data, "factory", ""):
        val = RandomBatches(cfg, rank, device, "val") if cfg.data.val_samples >= cfg.data.batch_size else None
        return RandomBatches(cfg, rank, device, "train"), val
    train_ds, val_ds = build_datasets(cfg)
    train = TrainData(train_ds, cfg, rank, world_size, device, shuffle=True)
    val = TrainData(val_ds, cfg, rank, world_size, device, shuffle=False) if val_ds is not None else None
    return train, val
