"""`amptui ab --script`: the A/B table for the user's own script. Its variants chosen by the
script's own flags (--variant NAME='ARGS'), or AMP applied by amptui to its unmodified fp32 loop
(--variants: autocast around its model's forward, a GradScaler around its backward, clip and step).
A script that sets its own precision is refused for the latter in one line. The loops are tiny:
this CPU's bfloat16/float16 speed does not matter here, only what was applied and recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.cli import amptui, one_clear_line
from support.dashboard import Notes, app_for, async_test, home_ready, select_run, until
from support.paths import SCRIPTS
from support.records import events

from amptui.core.comparison import runsummary
from amptui.core.comparison.lossgaps import noise_band
from amptui.core.series import Series
from amptui.jobs import groups

SCRIPT = SCRIPTS / "plain_fp32.py"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _nothing_left(runs_dir: Path) -> bool:
    """No run folder and no A/B group (the probe's own folder is a temporary one)."""
    return not runs_dir.exists() or (groups.groups(runs_dir) == [] and not [d for d in runs_dir.iterdir() if d.is_dir()])


def _group_runs(runs_dir: Path) -> list[Path]:
    (group,) = groups.groups(runs_dir)
    assert group.state == "done", group
    return [runs_dir / r for r in group.runs]


@pytest.mark.slow
def test_amp_applied_to_a_plain_fp32_loop(runs_dir):
    before = _digest(SCRIPT)
    proc = amptui("ab", "--script", str(SCRIPT), "--variants", "fp32,bf16,fp16+scaler", "--set", "log.every=1",
                  check=True)
    assert _digest(SCRIPT) == before  # the script file is never changed
    dirs = _group_runs(runs_dir)
    assert len(dirs) == 3
    listed = {r["run_id"]: r for r in json.loads(amptui("runs", "--format", "json", check=True).stdout)}
    assert [listed[d.name]["precision_words"] for d in dirs] == [
        "fp32", "autocast bfloat16, applied by amptui", "autocast float16 + GradScaler, applied by amptui"]
    for words in ("autocast bfloat16, applied by amptui", "autocast float16 + GradScaler, applied by amptui"):
        assert words in proc.stdout  # the A/B's own table
    # what the hooks saw: the script never autocasts or scales; amptui's autocast and scaler did
    starts = [events(d)[0] for d in dirs]
    assert [(s["precision"]["autocast"], s["precision"]["grad_scaler"]) for s in starts] == \
        [(False, False), (True, False), (True, True)]
    assert [s["precision"].get("dtype") for s in starts[1:]] == ["bfloat16", "float16"]
    assert "apply_amp" not in (dirs[0] / "config.toml").read_text()
    assert 'apply_amp = "fp16+scaler"' in (dirs[2] / "config.toml").read_text()
    steps = [[r for r in events(d) if r["kind"] == "step"] for d in dirs]
    assert [len(s) for s in steps] == [6, 6, 6]
    assert all(r["scale"] is None for r in steps[0] + steps[1])
    assert all(r["scale"] == 2.0 ** 16 and r["skipped"] == 0 for r in steps[2])  # the applied scaler's steps
    # the same loss, within the fp32 run's noise band, at the common (last) step
    baseline = Series()
    for r in steps[0]:
        baseline.add(r["step"], r["loss"])
    band = noise_band(baseline)
    assert all(abs(s[-1]["loss"] - steps[0][-1]["loss"]) <= band for s in steps[1:]), (band, steps)
    assert [runsummary.summarize(d).skipped_total for d in dirs] == [0, 0, 0]


@pytest.mark.slow
def test_variants_chosen_by_the_scripts_own_flags(runs_dir):
    proc = amptui("ab", "--script", str(SCRIPT), "--variant", "fp32=--dtype float32", "--variant",
                  "bf16=--dtype bfloat16", "--set", "log.every=2", "--", "--steps", "4", check=True)
    assert "ran different code" not in proc.stdout + proc.stderr  # the same file both times
    dirs = _group_runs(runs_dir)
    starts = [events(d)[0] for d in dirs]
    assert [s["precision"]["words"] for s in starts] == ["fp32", "autocast bfloat16"]  # the script's own
    listed = {r["run_id"]: r for r in json.loads(amptui("runs", "--format", "json", check=True).stdout)}
    assert [listed[d.name]["precision_words"] for d in dirs] == ["fp32", "autocast bfloat16"]
    assert [events(d)[-1]["steps"] for d in dirs] == [4, 4]  # `-- ARGS` reach every variant
    assert "trained 4 steps (bfloat16)" in (dirs[1] / "output.log").read_text()


SELF_EDITING = """import pathlib
import torch
import helper

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=helper.LR)
for _ in range(3):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
edited = pathlib.Path(helper.__file__)  # the next variant runs another learning rate
edited.write_text(f"LR = {helper.LR * 2}\\n")
"""


@pytest.mark.slow
def test_ab_script_says_when_the_script_changed_its_own_code_between_variants(runs_dir, tmp_path):
    """Each run records the hashes of the script and the modules it imports from its folder as it
    starts: the A/B's notes say the variants ran different programs, naming the file, as `compare` does."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text(SELF_EDITING)
    (folder / "helper.py").write_text("LR = 0.1\n")
    proc = amptui("ab", "--script", str(folder / "train.py"), "--variant", "first=--x", "--variant", "second=--x",
                  "--set", "log.every=1", check=True)
    dirs = _group_runs(runs_dir)
    codes = [events(d)[0]["code"] for d in dirs]
    assert [sorted(c["files"]) for c in codes] == [["helper.py", "train.py"]] * 2
    assert codes[0]["files"]["train.py"] == codes[1]["files"]["train.py"]
    assert codes[0]["files"]["helper.py"] != codes[1]["files"]["helper.py"]
    said = " ".join(proc.stdout.split())  # the notes wrap at the terminal's width
    assert "warning: these runs ran different code: helper.py changed between them" in said, proc.stdout
    later = " ".join(amptui("compare", *(d.name for d in dirs), check=True).stdout.split())
    assert "ran different code: helper.py changed" in later


@pytest.mark.slow
def test_a_script_that_sets_its_own_precision_is_refused_for_applied_amp(runs_dir):
    """Found by a short probe of the script as written (up to its first step) before any variant
    runs (issue 45.2): one line that says to use --variant, and no run or A/B group left behind."""
    line = one_clear_line(amptui("ab", "--script", str(SCRIPT), "--variants", "bf16", "--", "--dtype", "bfloat16"),
                          code=2)
    assert "sets its own precision" in line and "--variant NAME='ARGS'" in line, line
    line = one_clear_line(amptui("ab", "--script", str(SCRIPT), "--variants", "fp32,fp16+scaler", "--",
                                 "--dtype", "float16"), code=2)
    assert "sets its own precision (torch.autocast('cpu', dtype=torch.float16), a GradScaler of its own)" in line \
        and "--variant" in line, line
    assert _nothing_left(runs_dir)


@pytest.mark.slow
@async_test
async def test_dashboard_a_on_a_script_run_starts_the_ab_of_that_script_with_its_arguments(runs_dir):
    """Home, a script run highlighted in Runs: `a` is `amptui ab --script FILE --detach -- ARGS` with
    the arguments the run recorded (the device's default variants: fp32,bf16 on this CPU)."""
    amptui("run", "--script", str(SCRIPT), "--", "--steps", "3", check=True)
    (first,) = [p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    app = app_for(runs_dir)
    async with app.run_test(size=(110, 34)) as pilot:
        await home_ready(pilot)
        notes = Notes().install(app)
        await select_run(pilot, first.name)
        await pilot.press("a")
        await until(pilot, lambda: "plain_fp32.py with its recorded arguments (--steps 3)" in notes.text())
        await until(pilot, lambda: [g.state for g in groups.groups(runs_dir)] == ["done"], timeout=240)
    dirs = _group_runs(runs_dir)
    assert [events(d)[-1]["steps"] for d in dirs] == [3, 3]
    assert [runsummary.summarize(d).precision_words for d in dirs] == ["fp32", "autocast bfloat16"]
    assert 'apply_amp = "bf16"' in (dirs[1] / "config.toml").read_text()


@pytest.mark.slow
def test_a_loop_that_updates_its_parameters_by_hand_is_refused_for_fp16_scaler_before_running(runs_dir):
    """A GradScaler applied to a loop with no optimizer step amptui can see would train on scaled
    gradients (issue 41.3): refused in one line by the probe, before any variant runs."""
    hand = SCRIPTS / "manual_sgd.py"
    line = one_clear_line(amptui("ab", "--script", str(hand), "--variants", "fp32,fp16+scaler"), code=2)
    assert "no torch.optim optimizer step amptui can see" in line and "fp16+scaler" in line, line
    assert _nothing_left(runs_dir)


@pytest.mark.slow
def test_an_applied_variant_whose_loss_turns_nan_where_the_baselines_did_not_fails(runs_dir):
    """Issue 41.3: fp16 applied to a float32 loop whose activations are beyond float16's range: the
    fp16+scaler run's loss is NaN from its first step while fp32's is finite. It used to say
    `completed`, exit 0; the A/B now ends failed and says why."""
    script = SCRIPTS / "fp16_range_fp32.py"
    proc = amptui("ab", "--script", str(script), "--variants", "fp32,fp16+scaler", "--set", "log.every=1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fp16+scaler (its loss turned non-finite at step 1, where fp32's was finite)" in proc.stderr
    (group,) = groups.groups(runs_dir)
    assert group.state == "failed" and "non-finite" in group.error
