"""TF32: `amp.tf32` (auto / true / false), set with torch's current API where it exists and read back
whichever API answers; the `tf32` A/B variant (CUDA only: one line, exit 2 on a CPU); the start
record's state; the fp32 baseline's TF32 in compare and tune; doctor's line."""

from __future__ import annotations

import pytest
import torch

from amptui.cli.doctor import render_text
from amptui.core.comparison.tf32note import baseline_line
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError
from amptui.machine import tf32
from amptui.tune.machine_notes import tf32_note

pytestmark = pytest.mark.timeout(300)


# --- the key and the variant ---------------------------------------------------------------------

def test_amp_tf32_takes_auto_true_or_false_and_names_itself_otherwise():
    assert config.build_config({}).amp.tf32 == "auto"
    for value in ("auto", True, False):
        assert config.build_config({}, {"amp.tf32": value}).amp.tf32 == value
    for bad in ("yes", 1, "on"):
        with pytest.raises(ConfigError, match="amp.tf32"):
            config.build_config({}, {"amp.tf32": bad})


def test_tf32_is_fp32_on_tensor_cores_and_its_ab_pairs_it_with_strict_fp32():
    p = Precision.from_variant("tf32")
    assert (p.autocast, p.scaler, p.mode.tf32(p), p.short, p.words) == (False, False, True, "tf32", "fp32 + TF32")
    assert p.overrides() == {"amp.autocast": False, "amp.grad_scaler": False, "amp.tf32": True}
    resolved = Precision.from_config(config.build_config({}, p.overrides()), "cuda")
    assert resolved.short == "tf32" and resolved.as_record()["tf32"] is True
    assert "tf32" not in Precision.from_variant("fp32").as_record()  # older records unchanged
    with pytest.raises(ValueError):
        Precision.from_variant("tf32+scaler")
    got = dict(ab.expand("fp32,tf32,fp16+scaler", "cuda"))
    assert got["fp32"]["amp.tf32"] is False and got["tf32"]["amp.tf32"] is True  # IEEE vs TF32
    assert "amp.tf32" not in got["fp16+scaler"]
    assert "amp.tf32" not in dict(ab.expand("fp32,bf16", "cuda"))["fp32"]  # without tf32: torch's default


def test_amp_tf32_true_on_a_cpu_runs_with_a_warning_that_it_changes_nothing():
    from amptui.core.prepare import preflight

    cpu = config.build_config({}, {"amp.tf32": True, "run.device": "cpu"})
    assert any("amp.tf32 = true on the CPU" in n for n in preflight.odd_combinations(cpu))
    assert not any("tf32" in n for n in preflight.odd_combinations(config.build_config({}, {"run.device": "cpu"})))


# --- applying and reading it ---------------------------------------------------------------------

@pytest.fixture
def tf32_restored():
    """Put torch's TF32 settings back as they were (through the API this torch has)."""
    b = torch.backends
    if tf32.has_new_api(torch):
        saved = (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision)
        yield
        b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision = saved
    else:
        saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
        yield
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved


def test_apply_sets_matmul_and_convolutions_and_state_reads_them_back(tf32_restored):
    before = tf32.state(torch)
    tf32.apply("auto")
    assert tf32.state(torch) == before  # auto: torch's defaults untouched
    assert before["api"] == ("fp32_precision" if tf32.has_new_api(torch) else "allow_tf32")
    tf32.apply(True)
    assert tf32.state(torch) | {"supported": None} == {"matmul": True, "cudnn": True, "api": before["api"],
                                                         "supported": None}
    tf32.apply(False)
    assert (tf32.state(torch)["matmul"], tf32.state(torch)["cudnn"]) == (False, False)
    assert tf32.state(torch, torch.device("cpu"))["supported"] is False


def test_torch_defaults_are_matmuls_off_convolutions_on(tf32_restored):
    state = tf32.state(torch)
    assert (state["matmul"], state["cudnn"]) == (False, True)


# --- said where the fp32 baseline is judged ------------------------------------------------------

ON_A100 = {"matmul": False, "cudnn": True, "api": "fp32_precision", "supported": True}


def test_baseline_line_only_where_the_device_has_tf32():
    line = baseline_line("r1", ON_A100)
    assert line.startswith("fp32 baseline r1: TF32 matmuls off, TF32 cuDNN convolutions on")
    assert "partly on TF32" in line
    assert "IEEE float32 throughout" in baseline_line("r1", {**ON_A100, "cudnn": False})
    assert baseline_line("r1", {**ON_A100, "supported": False}) is None  # a CPU, a V100
    assert baseline_line("r1", None) is None  # a run from before the field
    assert tf32_note(ON_A100)[0].startswith("Fp32 baseline (the reference): TF32 matmuls off")
    assert tf32_note(None) == []


def test_doctor_shows_the_tf32_defaults():
    info = {"torch": {"version": "2.x", "cuda": "13.0", "cudnn": None, "cuda_available": False, "threads": 2,
                      "tf32": {"matmul": False, "cudnn": True, "api": "fp32_precision"}},
            "gpus": [], "nvml": {"available": False, "reason": "none"},
            "cpu": {"model": "cpu", "cores": 2, "usable_cores": 2, "capability": "avx2", "flags": {}},
            "rates": {}, "benchmarked": False,
            "recommendation": {"dtype": "bfloat16", "autocast": True, "grad_scaler": False, "reason": "r"}}
    text = render_text(info)
    assert "TF32 by default: matmuls off, cuDNN convolutions on (torch's fp32_precision API)" in text
    assert "amp.tf32 = true / false sets both; CUDA only: no effect here" in text
