"""Nothing amptui starts imports amptui from the working folder: `python -m amptui...` puts that
folder first on the import path, so an `amptui/` there (a checkout, or code planted in a shared
folder) ran instead, as the user. The user's own code there still works: a preset's
model.factory is imported from the working folder, a script's own folder is on its path.
(`amptui serve`'s tabs: tests/process/test_serve.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.records import only_run, wait_for_end

from amptui.jobs.spawn import amptui_python

FACTORY = """
from torch import nn

def build(num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 8), nn.ReLU(), nn.Linear(8, num_classes))
"""

PRESET = """
[run]
max_steps = 2
[model]
factory = "tiny_model:build"
num_classes = 4
[data]
name = "synthetic"
img_size = 8
batch_size = 8
train_samples = 32
val_samples = 16
[log]
every = 1
checkpoint_every = 0
"""


def plant(folder: Path) -> Path:
    """An `amptui/` package and a `sitecustomize.py` (which every Python that finds it on its path
    runs as it starts) in `folder` that leave a file behind if they are ever imported."""
    marker = folder / "planted-amptui-ran"
    (folder / "amptui").mkdir()
    for path in (folder / "amptui" / "__init__.py", folder / "amptui" / "__main__.py", folder / "sitecustomize.py"):
        path.write_text(f"open({str(marker)!r}, 'a').write({path.name!r} + '\\n')\n")
    return marker


def amptui_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`amptui ARGS` as the `amptui` command runs it (its own folder first on the path, not the
    working folder): what the user typed is not under test, what it starts is."""
    return subprocess.run([*amptui_python(), "-m", "amptui", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dist", [[], ["--set", "dist.mode=ddp", "--set", "dist.nproc_per_node=2"]],
                         ids=["trainer", "torchrun"])
def test_a_detached_run_from_a_folder_holding_an_amptui_never_imports_it(isolated, runs_dir, dist):
    marker = plant(isolated)
    (isolated / "tiny_model.py").write_text(textwrap.dedent(FACTORY))
    (isolated / "custom.toml").write_text(textwrap.dedent(PRESET))
    # --detach: amptui starts itself again in the background, and that starts the trainer (or torchrun's ranks)
    proc = amptui_here("run", "custom.toml", "--detach", *dist, cwd=isolated)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run(runs_dir)
    end = wait_for_end(run_dir, timeout=240)[-1]
    assert end["status"] == "completed", (end, (run_dir / "output.log").read_text()[-3000:])
    assert not marker.exists(), (run_dir / "output.log").read_text()[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_script_run_from_a_folder_holding_an_amptui_imports_its_own_modules_not_that(isolated, runs_dir):
    marker = plant(isolated)
    (isolated / "helper.py").write_text("def go():\n    open('helper-ran', 'w').write('yes')\n")
    (isolated / "train.py").write_text("import helper  # beside the script, as `python train.py` finds it\n"
                                       "helper.go()\n")
    proc = amptui_here("run", "--script", "train.py", cwd=isolated)
    assert proc.returncode == 0, proc.stderr
    assert only_run(runs_dir) and (isolated / "helper-ran").exists()
    assert not marker.exists(), proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_empty_pythonpath_entry_does_not_put_the_working_folder_back(isolated, runs_dir):
    """`export PYTHONPATH=$PYTHONPATH:/x` with nothing before leaves an empty entry, which Python
    reads as the working folder, -P or not: the detached CLI and the trainer it starts found the
    planted amptui/ and sitecustomize.py there. (The command the user typed starts without it here:
    what the shell's own Python imports is beyond amptui; what amptui starts is not.)"""
    marker = plant(isolated)
    (isolated / "tiny_model.py").write_text(textwrap.dedent(FACTORY))
    (isolated / "custom.toml").write_text(textwrap.dedent(PRESET))
    start = ("import os, sys; os.environ['PYTHONPATH'] = os.pathsep + '/x'; "
             "from amptui.cli.main import main; sys.exit(main())")
    proc = subprocess.run([sys.executable, "-P", "-c", start, "run", "custom.toml", "--detach"], cwd=isolated,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run(runs_dir)
    end = wait_for_end(run_dir, timeout=240)[-1]
    assert end["status"] == "completed", (end, (run_dir / "output.log").read_text()[-3000:])
    assert not marker.exists(), marker.read_text()
