"""The benchmarks that compare amptui with hand-written loops still run against today's run folders
(gpu_ab.py read the A/B group's dot-folder as a run once and crashed); what they measure is theirs,
not a test's: tiny sizes, only that every figure is there."""

import json
import subprocess
import sys

import pytest
from support.paths import BENCHMARKS

pytestmark = pytest.mark.slow


@pytest.fixture
def gpu_ab(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gpu_ab

    return gpu_ab


def test_gpu_ab_reads_each_variant_of_a_real_ab(gpu_ab, tmp_path):
    model = gpu_ab.Model("mlp", "mlp-recipe", {"model.width": 32, "data.batch_size": 8}, 20)
    found = gpu_ab.amptui_ab(model, ["fp32", "bf16"], "cpu", tmp_path / "runs")
    assert set(found) == {"fp32", "bf16"}
    for ms, speedup in found.values():
        assert ms > 0 and speedup > 0
    assert found["fp32"][1] == 1.0  # the first variant is the baseline


def test_the_hand_loop_takes_every_loop_detail():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "bare_recipe.py"), "--device", "cpu", "--dtype", "bf16",
                          "--width", "16", "--batch", "4", "--steps", "6", "--warmup", "2", "--optimizer", "fused",
                          "--keep-grads", "--no-scaler-calls", "--reuse-host-memory"],
                         capture_output=True, text=True, check=True).stdout
    said = json.loads(out.strip().splitlines()[-1])
    assert said["ms_per_step"] > 0
    assert (said["optimizer"], said["keep_grads"], said["no_scaler_calls"], said["reuse_host_memory"]) == \
        ("fused", True, True, True)
