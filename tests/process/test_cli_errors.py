"""Bad input: one clear line naming the file, key or line; non-zero exit; no traceback; nothing
left on disk. Each case goes through the command line's entry point, `main(argv)`, in this process
(the `cli` fixture); one refusal per command goes through a real `python -m amptui` (slow)."""

import subprocess
import sys

import pytest
from support.cli import amptui


def assert_clean_refusal(proc, runs_dir, *words):
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("amptui: error: "), proc.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not runs_dir.exists() or not any(runs_dir.iterdir()), "a refused run must leave nothing behind"


@pytest.mark.slow
def test_help_imports_no_torch():
    # What keeps `--help` fast is that the CLI does not import torch; its wall time is measured
    # in benchmarks/startup.py (a wall-clock bound here would only fail on a loaded machine).
    proc = amptui("--help", check=True)
    assert "presets" in proc.stdout
    out = subprocess.run([sys.executable, "-c", "import sys, amptui.cli.main; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# One refusal per command through a real `python -m amptui` process: the entry point, its exit code
# and its stderr as a user's shell sees them (`doctor` runs for real in tests/process/test_doctor.py).
REAL_REFUSALS = [(("run", "quickstart", "--set", "amp.dtype=float8"), "amp.dtype"),
                 (("resume", "no-such-run"), "no-such-run"), (("stop", "../etc"), "../etc"),
                 (("ab", "quickstart", "--runs-dir", "notes.md"), "not a folder"),
                 (("runs", "--runs-dir", "notes.md"), "not a folder"),
                 (("compare", "no-such-run"), "no-such-run"), (("watch", "no-such-run"), "no-such-run"),
                 (("presets", "show", "no-such-preset"), "no-such-preset"),
                 (("tune", "quickstart", "--keys", "optim.fused"), "optim.fused")]


@pytest.mark.slow
@pytest.mark.parametrize("argv,word", REAL_REFUSALS, ids=[argv[0] for argv, _ in REAL_REFUSALS])
def test_a_real_process_refuses_in_one_line(argv, word, isolated):
    (isolated / "notes.md").write_text("a file, not a folder\n")
    assert_clean_refusal(amptui(*argv), isolated / "runs", word)
