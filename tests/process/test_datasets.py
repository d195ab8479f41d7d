"""The real loaders (torchvision CIFAR10 and ImageFolder) on small data written in their real
on-disk formats, through the real trainer."""

import pickle

import numpy as np
import pytest
from PIL import Image
from support.cli import amptui
from support.records import events, only_run

from amptui.trainer.data import SKIP_CIFAR_MD5_ENV

pytestmark = pytest.mark.slow


def write_tiny_cifar10(root, per_batch=40, test=40):
    """cifar-10-batches-py as torchvision reads it: pickled dicts of uint8 rows (3x32x32) + labels.
    The class is written into the picture (a bright band at a class-specific row) so it is learnable."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def batch(n):
        labels = rng.integers(0, 10, n)
        images = rng.integers(0, 60, (n, 3, 32, 32), dtype=np.uint8)
        for i, label in enumerate(labels):
            images[i, :, 3 * label:3 * label + 3, :] = 250
        return {"data": images.reshape(n, 3072), "labels": labels.tolist()}

    for i in range(1, 6):
        with open(folder / f"data_batch_{i}", "wb") as fh:
            pickle.dump(batch(per_batch), fh)
    with open(folder / "test_batch", "wb") as fh:
        pickle.dump(batch(test), fh)
    with open(folder / "batches.meta", "wb") as fh:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)]}, fh)


def test_cifar10_loader_on_the_real_format(runs_dir, isolated):
    write_tiny_cifar10(isolated / "data")
    # torchvision verifies CIFAR-10's md5 sums, which a tiny file cannot match: skip only that.
    proc = amptui("run", "alexnet-cifar10", "--set", "model.name=smallcnn", "--set", "data.img_size=32",
                  "--set", "data.batch_size=20", "--set", "data.num_workers=0", "--set", "run.epochs=2",
                  "--set", "log.eval_every=1", "--set", "data.download=false", env={SKIP_CIFAR_MD5_ENV: "1"})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    recs = events(only_run(runs_dir))
    assert recs[0]["steps_per_epoch"] == 10  # 200 training images / 20
    epochs = [r for r in recs if r["kind"] == "epoch"]
    assert len(epochs) == 2 and epochs[-1]["val_acc"] is not None
    assert recs[-1]["status"] == "completed"


def test_cifar10_with_wrong_checksums_is_refused_without_the_bypass(runs_dir, isolated):
    write_tiny_cifar10(isolated / "data")
    proc = amptui("run", "alexnet-cifar10", "--set", "data.download=false", "--set", "run.max_steps=1")
    # The files exist, so the pre-flight passes; torchvision's own md5 check then fails the run.
    assert proc.returncode == 1
    assert "corrupted" in proc.stderr and "Traceback" not in proc.stderr


def write_intel_layout(root, classes=("buildings", "forest", "glacier"), per_class=8, nested=True):
    """Intel Image Classification as Kaggle ships it: seg_train/seg_train/<class>/*.jpg."""
    rng = np.random.default_rng(1)
    for split, n in (("seg_train", per_class), ("seg_test", per_class // 2)):
        base = root / split / split if nested else root / split
        for c, name in enumerate(classes):
            (base / name).mkdir(parents=True)
            for i in range(n):
                pixels = rng.integers(0, 80, (40, 48, 3), dtype=np.uint8)
                pixels[..., c] = 230
                Image.fromarray(pixels).save(base / name / f"{i}.jpg")


@pytest.mark.parametrize("nested", [True, False])
def test_imagefolder_loader_on_the_intel_layout(runs_dir, isolated, nested):
    write_intel_layout(isolated / "intel", nested=nested)
    proc = amptui("run", "resnet18-intel", "--set", "model.pretrained=false", "--set", "model.num_classes=3",
                  "--set", "data.root=intel", "--set", "data.img_size=32", "--set", "data.batch_size=8",
                  "--set", "data.num_workers=0", "--set", "run.epochs=1")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    recs = events(only_run(runs_dir))
    assert recs[0]["steps_per_epoch"] == 3  # 24 images / 8
    assert recs[-1]["status"] == "completed" and recs[-1]["val_acc"] is not None


def test_imagefolder_class_count_must_match(runs_dir, isolated):
    write_intel_layout(isolated / "intel")
    proc = amptui("run", "resnet18-intel", "--set", "model.pretrained=false", "--set", "data.root=intel")
    assert proc.returncode == 2 and "has 3 classes but model.num_classes = 6" in proc.stderr
