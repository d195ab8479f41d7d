"""The measured peak matmul rate is cached per (device, dtype, torch version) in
$XDG_CACHE_HOME/amptui/peak_tflops.json, so runs do not pay for the measurement at every start."""

from __future__ import annotations

import json

import pytest
import torch

from amptui.machine import peaks


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    peaks.forget_measured_peaks()
    yield tmp_path / "cache" / "amptui" / "peak_tflops.json"
    peaks.forget_measured_peaks()  # the next test's process memory holds no fake rate


class Calls(list):
    rate = 2.5


@pytest.fixture
def measured(monkeypatch):
    """Stands in for the matmul measurement (slow, machine-dependent); records its calls.
    `measured.rate` is what the next measurement gives."""
    calls = Calls()

    def fake(device, dtype, budget_s=0.3):
        calls.append((str(device), peaks.dtype_name(dtype)))
        return calls.rate

    monkeypatch.setattr(peaks, "measure_matmul_tflops", fake)
    return calls


def test_measured_once_then_read_from_the_cache(cache_home, measured, monkeypatch):
    assert peaks.peak_cache_path() == cache_home
    assert peaks.peak_tflops("cpu", torch.bfloat16) == 2.5
    data = json.loads(cache_home.read_text())
    (key,) = data["peak_tflops"]
    assert key.endswith(f"|bfloat16|torch {torch.__version__}") and f"({torch.get_num_threads()} threads)" in key
    assert [p.name for p in cache_home.parent.iterdir()] == ["peak_tflops.json"]   # no temp file left
    peaks.forget_measured_peaks()   # a new process: only the file remembers
    assert peaks.peak_tflops("cpu", "bf16") == 2.5
    assert measured == [("cpu", "bfloat16")]
    assert peaks.peak_tflops("cpu", "float32") == 2.5   # another dtype is measured and added
    assert measured[-1] == ("cpu", "float32") and len(json.loads(cache_home.read_text())["peak_tflops"]) == 2


@pytest.mark.parametrize("content", ["{not json", '{"format": 1, "peak_tflops": [1, 2]}', '"text"',
                                     '{"format": 99, "peak_tflops": {}}', ""])
def test_a_damaged_cache_is_ignored_and_rewritten(cache_home, measured, content):
    cache_home.parent.mkdir(parents=True)
    cache_home.write_text(content)
    assert peaks.peak_tflops("cpu", "float32") == 2.5 and len(measured) == 1
    assert json.loads(cache_home.read_text())["format"] == peaks.PEAK_CACHE_FORMAT


def test_damaged_entries_are_skipped_and_the_best_rate_is_kept(cache_home, measured, monkeypatch):
    key = peaks.peak_cache_key("cpu", "float32")
    cache_home.parent.mkdir(parents=True)
    cache_home.write_text(json.dumps({"format": 1, "peak_tflops": {key: "fast", "other|x|y": -1}}))
    assert peaks.peak_tflops("cpu", "float32") == 2.5 and len(measured) == 1
    measured.rate = 1.0   # `amptui doctor` measuring while other work disturbs it: lower, not kept
    assert peaks.measure_all(devices=["cpu"], dtypes=("float32",)) == {"cpu": {"float32": 1.0}}
    assert json.loads(cache_home.read_text())["peak_tflops"] == {key: 2.5}


def test_doctor_refreshes_the_cache(cache_home, measured):
    rates = peaks.measure_all(devices=["cpu"], dtypes=("float32", "bfloat16"))
    assert rates == {"cpu": {"float32": 2.5, "bfloat16": 2.5}}
    stored = json.loads(cache_home.read_text())["peak_tflops"]
    assert stored == {peaks.peak_cache_key("cpu", "float32"): 2.5, peaks.peak_cache_key("cpu", "bfloat16"): 2.5}


def test_an_unwritable_cache_only_means_measuring(cache_home, measured, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))   # a file where the folder should be
    assert peaks.peak_tflops("cpu", "float32") == 2.5
