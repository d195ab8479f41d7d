"""`amptui run --script` as `python script.py` shows it (issue 34): the script's output live on the
terminal above amptui's progress line, or through a pipe on stdout with amptui's lines on stderr;
its traceback from its own first frame; a script that ends before its first step lists its
precision as not seen; a float32 run's start record names float32; a run none of whose steps
trained is said to be one."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support.script_live import _script
from support.terminal import amptui_on_pty

# --- slow: the real command ------------------------------------------------------------------------

TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n  File \"[^\"]*chatty\.py\", line \d+, in <module>")


@pytest.mark.slow
def test_in_a_pipe_the_scripts_output_is_on_stdout_and_amptuis_lines_on_stderr(isolated):
    script = _script(isolated)
    proc = subprocess.run([sys.executable, "-m", "amptui", "run", "--script", str(script)],
                          capture_output=True, text=True, timeout=300, cwd=isolated)
    assert proc.returncode == 1, proc.stderr
    out, err = proc.stdout, proc.stderr
    assert "hello from the script" in out and "a note on stderr" in out
    assert [line for line in out.splitlines() if line.startswith("script step")] == [f"script step {i}" for i in range(6)]
    assert TRACEBACK.search(out), out  # from the script's first frame: no runpy, no amptui
    assert "runpy" not in out and "amptui/trainer" not in out and out.rstrip().endswith("ValueError: boom at the end")
    assert "run " in err and ": failed" in err and "amptui: error: ValueError: boom at the end" in err
    assert "hello from the script" not in err
    (run,) = [p for p in (isolated / "runs").iterdir() if p.is_dir()]
    log = (run / "output.log").read_text()  # the log keeps everything, as before
    assert "hello from the script" in log and "a note on stderr" in log and "ValueError: boom at the end" in log
    end = json.loads((run / "events.jsonl").read_text().splitlines()[-1])
    assert end["kind"] == "end" and end["status"] == "failed" and end["steps"] == 6


@pytest.mark.slow
def test_on_a_terminal_the_scripts_prints_and_traceback_show_with_the_progress_line(isolated):
    script = _script(isolated)
    code, drawn = amptui_on_pty(["run", "--script", str(script), "--set", "log.every=1"], size=(120, 40))
    assert code == 1, drawn
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn).replace("\r\n", "\n")
    for line in ("hello from the script", "a note on stderr", "script step 0", "script step 5",
                 "ValueError: boom at the end"):
        assert line in plain, plain
    assert re.search(r"File \"[^\"]*chatty\.py\", line \d+, in <module>", plain) and "runpy" not in plain
    assert re.search(r"\d+ steps", plain) or re.search(r"\d+/\d+", plain)  # amptui's own progress line
    assert ": chatty, fp32 on " in plain  # the start line, above the script's later prints
    assert "amptui: error: ValueError: boom at the end" in plain
    # the script's first print comes before amptui's failure lines
    assert plain.index("hello from the script") < plain.index("amptui: error:")


@pytest.mark.slow
def test_a_script_that_does_not_compile_shows_its_file_and_line_as_python_does(isolated):
    script = _script(isolated, "print('never')\nx = (\n", "bad.py")
    proc = subprocess.run([sys.executable, "-m", "amptui", "run", "--script", str(script)],
                          capture_output=True, text=True, timeout=300, cwd=isolated)
    assert proc.returncode == 1
    assert f'File "{script}", line 2' in proc.stdout and "SyntaxError" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout and "runpy" not in proc.stdout  # no frames of amptui's runner
    assert "amptui: error: SyntaxError" in proc.stderr
