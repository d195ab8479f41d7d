"""Issue 50.10 and its Low items: only the process that started a script's run ends it. A child the
script forks (os.fork) neither decides the run's end by its exit nor duplicates its records; and a
script's exit code is read as Python computes it (SystemExit(256) exits 0, SystemExit(True) 1, a
message 1 with its text). Real `amptui run --script` processes; tiny loops."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.cli import amptui
from support.records import events

from amptui.core.run import runs

# A tiny loop that forks at its second optimizer step. The child ends as `CHILD` says, the parent
# waits for it and trains on to step 6, then ends as `PARENT` says.
FORKER = """import os, sys
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 7):
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    if step == 2:
        child = os.fork()
        if child == 0:
            {child}
        os.waitpid(child, 0)
{parent}
"""


def forker(tmp_path, child: str, parent: str = "") -> str:
    script = tmp_path / "forker.py"
    script.write_text(FORKER.format(child=child, parent=parent))
    return str(script)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("child", ["sys.exit(3)", "break"], ids=["child_exits_3", "child_returns"])
def test_a_forked_child_neither_ends_the_run_nor_duplicates_its_records(isolated, runs_dir, child):
    """`break`: the child leaves the loop and the script ends normally in it too (it used to write a
    second step record and a second end); sys.exit(3) in the child used to end the run `failed`."""
    script = forker(isolated, child)
    done = amptui("run", "--script", script, "--set", "log.every=1", "--runs-dir", str(runs_dir))
    assert done.returncode == 0, (done.stdout, done.stderr)
    (info,) = runs.list_runs(runs_dir)
    assert info.status == "completed", info.error
    records = events(info.path)
    assert [r["kind"] for r in records].count("end") == 1
    steps = [r["step"] for r in records if r["kind"] == "step"]
    assert steps == sorted(set(steps)) and steps[-1] == 6, steps


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("ending, code, status, words", [
    ("raise SystemExit(256)", 0, "completed", None),
    ("raise SystemExit(True)", 1, "failed", "exit code 1"),
    ("raise SystemExit('out of patience')", 1, "failed", "exit code 1: out of patience"),
])
def test_a_scripts_exit_code_is_what_python_makes_of_it(isolated, runs_dir, ending, code, status, words):
    script = forker(isolated, "os._exit(0)", ending)
    done = amptui("run", "--script", script, "--runs-dir", str(runs_dir))
    assert done.returncode == code, (done.stdout, done.stderr)
    (info,) = runs.list_runs(runs_dir)
    assert info.status == status, info.error
    if words:
        assert info.error.endswith(words) and "True" not in info.error, info.error


# A script of its own (no `amptui run`) with a Monitor: it forks at step 2; the child steps once more
# and ends as `CHILD` says, inside the Monitor's `with`; the parent waits, trains on to step 6.
MONITORED = """import os, sys
import torch
import amptui
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with amptui.Monitor("forky", optimizer=opt, model=model, run_dir=sys.argv[1], log_every=1) as mon:
    for step in range(1, 7):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(loss)
        if step == 2:
            child = os.fork()
            if child == 0:
                mon.step(loss)
                {child}
            os.waitpid(child, 0)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("child", ["sys.exit(3)", "break"], ids=["child_exits_3", "child_returns"])
def test_a_monitors_forked_child_neither_ends_the_run_nor_duplicates_its_records(isolated, runs_dir, child):
    script = isolated / "monitored.py"
    script.write_text(MONITORED.format(child=child))
    run_dir = runs_dir / "forky"
    done = subprocess.run([sys.executable, str(script), str(run_dir)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    records = events(run_dir)
    ends = [r for r in records if r["kind"] == "end"]
    assert [e["status"] for e in ends] == ["completed"]
    steps = [r["step"] for r in records if r["kind"] == "step"]
    assert steps == sorted(set(steps)) and steps[-1] == 6, steps
