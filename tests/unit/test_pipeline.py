"""The input pipeline: synthetic data made on the training device, the prefetcher, the time the
loop waits for data (and the input-bound notice it leads to), data.num_workers = "auto"."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import Dataset

from amptui.core.config import values as cfgmod
from amptui.core.errors import ConfigError
from amptui.telemetry.meter import TimedBatches
from amptui.trainer import data as datamod

CPU = torch.device("cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def synthetic_cfg(**data):
    return cfgmod.build_config({"run": {"seed": 3}, "model": {"name": "smallcnn", "num_classes": 4},
                                "data": {"name": "synthetic", "img_size": 16, "batch_size": 8,
                                         "train_samples": 44, "val_samples": 16, **data}})


def as_lists(batches):
    return [(x.clone(), y.clone()) for x, y in batches]


def same(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))


def test_synthetic_data_is_made_on_the_device_and_deterministic():
    cfg = synthetic_cfg()
    train, val = datamod.build_train_val(cfg, rank=0, world_size=1, device=CPU)
    # no Dataset, no DataLoader: whole batches drawn on the device
    assert isinstance(train, datamod.SyntheticBatches) and isinstance(val, datamod.SyntheticBatches)
    epoch0 = as_lists(train.batches(0))
    assert train.batches_per_epoch == 6 and len(epoch0) == 6
    assert [len(y) for _, y in epoch0] == [8, 8, 8, 8, 8, 4]
    assert all(x.device == CPU and x.shape[1:] == (3, 16, 16) and x.dtype == torch.float32 for x, _ in epoch0)
    again, _ = datamod.build_train_val(cfg, 0, 1, CPU)
    assert same(as_lists(again.batches(0)), epoch0)                    # same seed: same batches
    assert same(as_lists(again.batches(0, start=4)), epoch0[4:])       # resumed mid-epoch: the rest
    assert not same(as_lists(train.batches(1)), epoch0)                # each epoch draws afresh
    assert same(as_lists(val.batches(0)), as_lists(val.batches(0)))    # validation is fixed
    other, _ = datamod.build_train_val(synthetic_cfg().with_overrides({"run.seed": 4}), 0, 1, CPU)
    assert not same(as_lists(other.batches(0)), epoch0)
    # learnable: each class is its own pattern (class means lie closer to their template than to others)
    xs, ys = zip(*[b for e in range(6) for b in train.batches(e)])
    x, y = torch.cat(xs), torch.cat(ys)
    for c in range(4):
        mean = x[y == c].mean(0)
        dist = [(mean - t).pow(2).mean().item() for t in train.templates]
        assert min(range(4), key=dist.__getitem__) == c


def test_ranks_get_their_own_share():
    cfg = synthetic_cfg()
    r0, _ = datamod.build_train_val(cfg, 0, 2, CPU)
    r1, _ = datamod.build_train_val(cfg, 1, 2, CPU)
    assert r0.batches_per_epoch == r1.batches_per_epoch == 3   # 22 samples each, batches of 8
    assert not same(as_lists(r0.batches(0)), as_lists(r1.batches(0)))


@pytest.mark.gpu
@needs_cuda
def test_synthetic_data_is_made_on_the_gpu():
    cuda = torch.device("cuda", torch.cuda.current_device())
    train, _ = datamod.build_train_val(synthetic_cfg(), 0, 1, cuda)
    x, y = next(train.batches(0))
    assert x.device == cuda and y.device == cuda and train.templates.device == cuda
    assert x.is_contiguous(memory_format=torch.channels_last)
    again, _ = datamod.build_train_val(synthetic_cfg(), 0, 1, cuda)
    assert same(as_lists(again.batches(0, start=2)), as_lists(train.batches(0))[2:])


class Numbers(Dataset):
    def __init__(self, n, delay=0.0):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.full((3,), float(i)), i


def loader_cfg(**data):
    return cfgmod.build_config({"data": {"batch_size": 4, "num_workers": 0, **data}})


def test_prefetcher_yields_the_loaders_batches_in_order():
    data = datamod.TrainData(Numbers(18), loader_cfg(), rank=0, world_size=1, device=CPU, shuffle=True)
    data.sampler.set_epoch(1)
    expected = as_lists(data.loader)
    got = as_lists(data.batches(1))
    assert same(got, expected) and len(got) == 5
    assert same(as_lists(data.batches(1, start=3)), expected[3:])
    # the generic prefetcher keeps order and nesting (tuples, dicts) whatever the device
    items = [(torch.tensor([i]), {"y": torch.tensor(i)}) for i in range(5)]
    out = list(datamod.prefetch_to_device(iter(items), CPU))
    assert [int(x) for x, _ in out] == list(range(5)) and [int(d["y"]) for _, d in out] == list(range(5))


@pytest.mark.gpu
@needs_cuda
def test_cuda_prefetcher_copies_ahead_in_order():
    cuda = torch.device("cuda", torch.cuda.current_device())
    data = datamod.TrainData(Numbers(18), loader_cfg(), rank=0, world_size=1, device=cuda, shuffle=True)
    assert data.loader.pin_memory
    data.sampler.set_epoch(0)
    expected = as_lists(data.loader)
    got = [(x.cpu(), y.cpu()) for x, y in data.batches(0)]
    assert same(got, expected)


def test_waited_s_counts_host_time_blocked_on_the_loader():
    """The Recorder's TimedBatches (what the trainer and the Monitor wrap their batches in)."""
    slow = datamod.TrainData(Numbers(12, delay=0.02), loader_cfg(), 0, 1, CPU, shuffle=False)
    it = TimedBatches(slow.batches(0))
    assert it.waited_s == 0.0
    stepped, began = 0.0, time.perf_counter()
    for _ in it:
        t0 = time.perf_counter()
        time.sleep(0.01)        # the "step": not waiting
        stepped += time.perf_counter() - t0
    wall = time.perf_counter() - began
    # every loader sleep is counted, and none of the steps: the wait fits in the wall time outside
    # them, however much longer than asked each sleep took on a loaded machine
    assert 12 * 0.02 <= it.waited_s <= wall - stepped + 1e-3, (it.waited_s, wall, stepped)
    fast = datamod.TrainData(Numbers(12), loader_cfg(), 0, 1, CPU, shuffle=False)
    it = TimedBatches(fast.batches(0))
    list(it)
    assert it.waited_s < 0.1


def test_num_workers_auto_resolves_for_the_machine():
    def workers(cpus, **over):
        cfg = cfgmod.build_config({"data": {"name": "imagefolder"}, **over})
        return cfgmod.resolve_num_workers(cfg, cpus=cpus)

    assert cfgmod.build_config().data.num_workers == "auto"
    assert workers(2) == 1 and workers(4) == 3 and workers(64) == 8 and workers(1) == 0
    assert workers(16, dist={"mode": "ddp", "nproc_per_node": 4}) == 3     # cores per process
    assert workers(16, data={"name": "synthetic"}) == 0                     # made on the device
    assert workers(16, data={"name": "imagefolder", "num_workers": 5}) == 5  # explicit numbers stay
    for bad in ("many", -1, 1.5, True):
        with pytest.raises(ConfigError, match="data.num_workers"):
            cfgmod.build_config(overrides={"data.num_workers": bad})
