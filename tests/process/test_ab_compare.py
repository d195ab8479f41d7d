"""A/B experiments and the compare table: variant expansion, the table's arithmetic on canned
event files, the four formats, TensorBoard export, and real short A/B runs."""

import json

import pytest
from PIL import Image
from support.cli import amptui
from support.records import events, events_so_far, only_run
from support.waits import wait_until


@pytest.mark.slow
def test_tensorboard_scalars_are_written(runs_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    amptui("run", "quickstart", "--set", "log.tensorboard=true", "--set", "run.max_steps=6", check=True)
    run_dir = only_run(runs_dir)
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/samples_per_s", "memory/rss_mib", "epoch/train_loss"} <= tags
    assert [e.step for e in acc.Scalars("train/loss")][-1] == 6


@pytest.mark.slow
def test_real_ab_of_the_recipe_prints_the_table(runs_dir):
    proc = amptui("ab", "mlp-recipe", "--variants", "fp32,bf16", "--set", "model.width=256",
                  "--set", "data.batch_size=128", "--set", "data.train_samples=2560", "--set", "run.max_steps=10",
                  check=True)
    assert "[1/2] fp32" in proc.stdout and "[2/2] bf16" in proc.stdout
    assert "speed-up" in proc.stdout and "1.00x" in proc.stdout
    listed = json.loads(amptui("runs", "--format", "json", check=True).stdout)
    assert sorted(r["precision"] for r in listed) == ["bf16", "fp32"]
    assert all(r["status"] == "completed" for r in listed)
    first = [events(runs_dir / r["run_id"]) for r in listed]
    assert all(e[0]["config"]["run"]["seed"] == first[0][0]["config"]["run"]["seed"] for e in first)


@pytest.mark.slow
def test_ctrl_c_ends_the_whole_ab(runs_dir):
    import signal
    import subprocess
    import sys

    # As from a terminal: a shell's background job (how a test suite may be started) would pass
    # SIGINT down ignored, and Python then installs no KeyboardInterrupt handler.
    proc = subprocess.Popen([sys.executable, "-m", "amptui", "ab", "quickstart", "--set", "run.epochs=20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until(lambda: proc.poll() is not None or any(r["kind"] == "step" for f in runs_dir.glob("*/events.jsonl")
                                                      for r in events_so_far(f.parent)), 90, "the first variant's step")
    assert proc.poll() is None, "the A/B ended before its first variant reached a step"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted after 1 of 2 variants" in err, out + err
    run_dir = only_run(runs_dir)
    assert events(run_dir)[-1]["status"] == "stopped", "the running variant stops with a checkpoint"


def write_images(root, per_class=12):
    """A small labelled ImageFolder in the Intel layout: each class is a colour."""
    import numpy as np

    rng = np.random.default_rng(2)
    for split, n in (("seg_train", per_class), ("seg_test", per_class // 2)):
        for c, name in enumerate(("red", "green", "blue")):
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                pixels = rng.integers(0, 90, (24, 24, 3), dtype=np.uint8)
                pixels[..., c] = 220
                Image.fromarray(pixels).save(root / split / name / f"{i}.png")


@pytest.mark.slow
def test_ab_on_real_labelled_images_reports_agreeing_accuracy(runs_dir, isolated):
    write_images(isolated / "imgs")
    proc = amptui("ab", "resnet18-intel", "--format", "json", "--set", "model.pretrained=false",
                  "--set", "model.name=smallcnn", "--set", "model.num_classes=3", "--set", "data.root=imgs",
                  "--set", "data.img_size=24", "--set", "data.batch_size=12", "--set", "data.num_workers=0",
                  "--set", "optim.lr=3e-3", "--set", "run.epochs=6", "--set", "sched.warmup_epochs=0", check=True)
    table = json.loads(proc.stdout[proc.stdout.index("\n[\n"):])  # after the progress lines
    accs = [row["val_acc"] for row in table]
    assert len(accs) == 2 and all(a is not None for a in accs)
    assert min(accs) >= 0.8 and abs(accs[0] - accs[1]) <= 0.1
