"""Issue 45, a newcomer's first hour: the install note for a CPU-only torch (README, doctor, the
first run), ... Each test asserts what a newcomer reads."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from support.paths import REPO, SCRIPTS
from support.records import wait_for_end
from support.terminal import amptui_on_pty

from amptui.cli import doctor
from amptui.core.config import presets
from amptui.core.prepare.preflight import GPU_DRIVER_PATHS
from amptui.jobs import detached, launch
from amptui.machine import cputorch

CPU_LINE = "pip install --force-reinstall torch torchvision --index-url https://download.pytorch.org/whl/cpu"
no_gpu_driver = pytest.mark.skipif(any(os.path.exists(p) for p in GPU_DRIVER_PATHS),
                                   reason="asserts what a machine without a CUDA GPU is told")


# --- install: a CPU-only torch ------------------------------------------------------------------

def test_the_readme_gives_the_cpu_line_before_its_first_picture_and_keeps_the_first_command():
    readme = (REPO / "README.md").read_text()
    opening = readme[:readme.index("![")]
    assert "```bash\npython3 -m venv .venv && . .venv/bin/activate && pip install -e . && amptui\n```" in opening
    assert CPU_LINE in opening and opening.index(CPU_LINE) > opening.index("pip install -e . && amptui")


def test_doctor_on_a_cuda_build_without_a_gpu_names_the_smaller_cpu_torch():
    report = doctor.collect(bench=False)
    report["gpus"], report["torch"]["cuda_available"] = [], False  # this machine's, as a GPU-less box sees it
    report["torch"]["cuda"] = "12.8"
    text = doctor.render_text(report)
    assert "CPU-only torch is smaller" in text and CPU_LINE in text
    report["torch"]["cuda"] = None  # a CPU build: nothing to say
    assert CPU_LINE not in doctor.render_text(report)


def test_the_installed_cuda_build_is_read_without_importing_torch():
    assert cputorch.installed_cuda_build() == torch.version.cuda


@pytest.fixture
def note_unsaid(isolated):
    """The state folder as on a machine amptui never ran on (conftest's `isolated` counts the note as said)."""
    (Path(os.environ["XDG_STATE_HOME"]) / "amptui" / cputorch.SAID).unlink()


@no_gpu_driver
def test_the_first_run_says_it_once(note_unsaid):
    expected = bool(torch.version.cuda)  # PyPI's Linux wheel: a CUDA build; the CPU wheel: nothing to say
    preset = presets.find_preset("quickstart")
    first: list[str] = []
    launch.resolve_config(preset, {}, notes=first)
    assert any(CPU_LINE in n for n in first) == expected, first
    second: list[str] = []
    launch.resolve_config(preset, {}, notes=second)
    assert not any(CPU_LINE in n for n in second)


@pytest.mark.slow  # a real detached `amptui run` (the dashboard's `r`)
@no_gpu_driver
@pytest.mark.skipif(not torch.version.cuda, reason="a CPU build of torch: nothing to say")
def test_the_dashboards_first_run_gets_the_note(runs_dir, note_unsaid):
    started, error = detached.start(["run", "quickstart", detached.DETACH, "--runs-dir", str(runs_dir),
                                     "--set", "run.max_steps=2", "--set", "amp.autocast=false"])
    assert error is None and started is not None
    assert any(CPU_LINE in n for n in started["notes"]), started
    wait_for_end(runs_dir / started["run_id"])


# --- help: every variant, from the precision modes ----------------------------------------------

def _names_in(help_text: str) -> set[str]:
    return set(re.findall(r"[\w.+-]+", " ".join(help_text.split())))


def test_ab_help_lists_every_variant_it_takes_float8_included(cli):
    from amptui.core.config.variants import known_variants

    said = _names_in(cli("ab", "--help").stdout)
    assert {"fp8", "fp8-rowwise", "mxfp8"} <= said
    assert set(known_variants()) - said == set()


def test_a_new_precision_mode_is_in_the_help_the_day_it_is_added(cli, monkeypatch):
    from amptui.core import modes

    class Fake(modes.PrecisionMode):  # stands in for a mode amptui does not have yet
        name = "fake"

        def variants(self):
            return ["fake8"]

        def parse(self, variant, base):
            return None

        def short(self, p):
            return "fake8"

        def words(self, p):
            return "fake8"

    monkeypatch.setattr(modes, "MODES", [*modes.MODES, Fake()])
    assert "fake8" in _names_in(cli("ab", "--help").stdout)


def test_tune_help_names_the_precisions_it_tries(cli):
    from amptui.core.config.variants import known_variants
    from amptui.tune.plan import FLOAT8_CANDIDATE, PRECISIONS

    said = _names_in(cli("tune", "--help").stdout)
    tried = {"fp32", *PRECISIONS, FLOAT8_CANDIDATE}
    assert tried <= said and tried <= set(known_variants())


# --- the script A/B: the script's own output, the slow-dtype note -------------------------------

@pytest.mark.slow  # two tiny runs of a real script, on a terminal
def test_the_script_ab_shows_the_scripts_output_and_the_slow_float16_note(runs_dir):
    script = SCRIPTS / "plain_fp32.py"
    code, drawn = amptui_on_pty(["ab", "--script", str(script), "--variants", "fp32,fp16+scaler"], size=(160, 40))
    assert code == 0, drawn
    assert drawn.count("trained 6 steps") == 2, drawn  # each variant's own last line, as `run --script` shows it
    # the note a preset's fp16 run on a CPU gives (float16 is slow on most CPUs, measured where it can be)
    assert "fp16+scaler: float16 autocast on the CPU: " in " ".join(drawn.split()), drawn


# --- estimates: a range with its basis, that holds on a busy machine -----------------------------

SMALL_AB = ["quickstart", "--variants", "fp32", "--set", "run.max_steps=24", "--set", "model.width=8",
            "--set", "data.batch_size=16"]  # float32 only: no CPU's bfloat16 speed matters


@pytest.mark.slow  # a real A/B (two tiny runs) with a busy loop beside it
@pytest.mark.timeout(600)
def test_the_ab_estimate_on_a_loaded_machine_contains_the_measured_time(runs_dir):
    import json
    import subprocess
    import sys
    import time

    from amptui.jobs.spawn import amptui_python

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        asked = subprocess.run([*amptui_python(), "-m", "amptui", "ab", *SMALL_AB, "--estimate", "--format", "json"],
                               capture_output=True, text=True, timeout=300, check=True)
        found = json.loads(asked.stdout.strip().splitlines()[-1])
        proc = subprocess.Popen([*amptui_python(), "-m", "amptui", "ab", *SMALL_AB], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        said = ""
        while "estimate:" not in said:  # the A/B's own estimate is said before its first run starts
            line = proc.stdout.readline()
            assert line, said
            said += line
        began = time.monotonic()
        said += proc.stdout.read()
        assert proc.wait(timeout=300) == 0, said
        took = time.monotonic() - began
    finally:
        busy.kill()
        busy.wait()
    assert found["low_s"] <= took <= found["high_s"], (took, found["words"])
    basis = found["basis"]
    assert basis["steps"] >= 2 and f"from {basis['steps']} steps of each" in found["words"]
    assert f"at load {basis['load']:.1f} on {basis['cores']} cores" in found["words"]


def test_the_eta_follows_the_pace_of_the_last_minute():
    """A run that slows to a third of its pace (the machine got busy) is told at its pace now: 40
    steps left at 3 s a step, not at the whole session's 2 s."""
    from amptui.core.run.runstate import RunState

    state = RunState()
    state.add({"kind": "start", "t": 0.0, "total_steps": 100, "run_id": "r", "preset": "p"})
    for step in range(1, 31):
        state.add({"kind": "step", "t": float(step), "step": step})
    assert state.eta(30.0, session_t=0.0) == pytest.approx(70.0)
    for step in range(31, 61):
        state.add({"kind": "step", "t": 30.0 + 3 * (step - 30), "step": step})
    assert state.eta(120.0, session_t=0.0) == pytest.approx(120.0)


# --- 80 columns: two script runs told apart -----------------------------------------------------

@pytest.mark.slow  # two tiny runs of a real script
def test_two_runs_of_one_script_are_named_by_its_file_and_arguments(runs_dir):
    from support.cli import amptui
    from support.records import only_run

    from amptui.core.run.runs import load_run
    from amptui.dashboard.widgets.runtable import preset_cell

    script = SCRIPTS / "plain_fp32.py"
    names = []
    for steps in ("2", "3"):
        amptui("run", "--script", str(script), "--", "--steps", steps, check=True)
        run_dir = only_run(runs_dir)
        names.append(preset_cell(load_run(run_dir)).plain)
        run_dir.rename(runs_dir.parent / run_dir.name)  # out of the folder: the next is the only run
    assert names == ["plain_fp32.py --steps 2 [code]", "plain_fp32.py --steps 3 [code]"], names
