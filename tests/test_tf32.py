"""TF32: `amp.tf32` (auto / true / false), set with torch's current API where it exists and read back
whichever API answers; the `tf32` A/B variant (CUDA only: one line, exit 2 on a CPU); the start
record's state; the fp32 baseline's TF32 in compare and tune; doctor's line."""

from __future__ import annotations

import pytest
import torch
from support.cli import amptui, one_clear_line
from support.records import events, only_run, record, write_records

from amptui.cli.doctor import render_text
from amptui.core.comparison import comparenotes, runsummary
from amptui.core.comparison.tf32note import baseline_line
from amptui.core.config import values as config
from amptui.core.config import variants as ab
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError
from amptui.core.stream.records import End, Start
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


def test_ab_tf32_on_a_cpu_is_one_line_exit_2_and_leaves_nothing(cli, runs_dir):
    line = one_clear_line(cli("ab", "mlp-recipe", "--variants", "fp32,tf32"))
    assert "--variants tf32" in line and "CUDA" in line and "CPU" in line
    assert not runs_dir.exists() or not any(runs_dir.rglob("*"))
    one_clear_line(cli("ab", "mlp-recipe", "--variants", "fp32,tf32", "--detach"))
    assert not runs_dir.exists() or not any(runs_dir.rglob("*"))


def test_amp_tf32_true_on_a_cpu_runs_with_a_warning_that_it_changes_nothing():
    from amptui.core.prepare import preflight

    cpu = config.build_config({}, {"amp.tf32": True, "run.device": "cpu"})
    assert any("amp.tf32 = true on the CPU" in n for n in preflight.odd_combinations(cpu))
    assert not any("tf32" in n for n in preflight.odd_combinations(config.build_config({}, {"run.device": "cpu"})))


def test_ab_refuses_setting_amp_tf32_itself(cli):
    line = one_clear_line(cli("ab", "quickstart", "--set", "amp.tf32=true"))
    assert "amp.tf32" in line and "--variants" in line


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


def canned(root, name, precision, tf32_state):
    run = root / name
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "canned"\n')
    write_records(run / "events.jsonl", [
        record(Start(run_id=name, preset="canned", config={}, precision=precision, world_size=1,
                     device={"type": "cuda", "name": "A100", "count": 1}, torch="2.x", host="h", pid=1,
                     tf32=tf32_state), 1.0),
        record(End(status="completed", total_time_s=1.0, steps=1, final_loss=0.1, val_acc=None), 2.0)])
    return run


def test_compare_says_whether_the_fp32_baseline_used_tf32(tmp_path):
    fp32 = runsummary.summarize(canned(tmp_path, "a", "fp32", ON_A100))
    amp = runsummary.summarize(canned(tmp_path, "b", "autocast float16 + GradScaler", ON_A100))
    assert any(n.startswith("fp32 baseline a: TF32 matmuls off") for n in comparenotes.notes([fp32, amp]))
    assert not any("TF32" in n for n in comparenotes.notes([amp, fp32]))  # the first run is not fp32


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


# --- on a GPU ------------------------------------------------------------------------------------

SHORT = ["--set", "run.max_steps=10", "--set", "log.every=5", "--set", "run.epochs=1"]


@pytest.mark.gpu
@pytest.mark.slow
def test_ab_fp32_tf32_on_cuda_records_each_runs_tf32_state(runs_dir):
    proc = amptui("ab", "quickstart", "--variants", "fp32,tf32", *SHORT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    starts = {}
    for run in runs_dir.iterdir():
        if run.is_dir() and not run.name.startswith("."):
            start = events(run)[0]
            starts[start["precision"]["short"]] = start
    assert set(starts) == {"fp32", "tf32"}
    supported = torch.cuda.get_device_capability() >= (8, 0)
    assert starts["fp32"]["tf32"] == {"matmul": False, "cudnn": False, "api": starts["fp32"]["tf32"]["api"],
                                      "supported": supported}
    assert starts["tf32"]["tf32"]["matmul"] is True and starts["tf32"]["tf32"]["cudnn"] is True
    assert starts["tf32"]["precision"]["words"] == "fp32 + TF32"
    if supported:
        assert "fp32 baseline" in proc.stdout and "TF32 matmuls off, TF32 cuDNN convolutions off" in proc.stdout


@pytest.mark.gpu
@pytest.mark.slow
def test_start_record_carries_torchs_default_tf32_state_on_cuda(runs_dir):
    amptui("run", "quickstart", "--set", "amp.autocast=false", *SHORT, check=True)
    start = events(only_run(runs_dir))[0]
    assert start["device"]["type"] == "cuda"
    assert (start["tf32"]["matmul"], start["tf32"]["cudnn"]) == (False, True)  # amp.tf32 = auto
    assert start["tf32"]["supported"] is (torch.cuda.get_device_capability() >= (8, 0))
