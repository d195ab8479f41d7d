"""Issue 50 (Build): one opener for runs-folder files. Every create, open or write under a runs
folder goes through amptui/core/safefile.py (no link followed, FIFOs and devices refused, O_EXCL
where creating). The scan fails on `write_text`, `write_bytes`, `open(`, `os.open` and `.open(`
anywhere else in amptui, but for the few calls below, each on a file that is not in a runs folder
(said why). A new one must go through safefile, or be added here with its reason."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from support.paths import PACKAGE, modules, parsed

from amptui.core import safefile

OPENER = PACKAGE / "core" / "safefile.py"
WRITES = {"write_text", "write_bytes"}

# file -> (how many such calls it may hold at most, why none of them is a runs-folder file)
NOT_RUNS_FOLDER = {
    "amptui/cli/estimate.py": (2, "/proc/self/stat and /proc/uptime"),
    "amptui/cli/pictures.py": (1, "watch --svg FILE: the file the user named on the command line"),
    "amptui/core/statedir.py": (1, "the lock beside a file of amptui's state folder (XDG_STATE_HOME)"),
    "amptui/core/run/trust.py": (1, "the state folder's record of code the user trusted"),
    "amptui/core/scriptcode.py": (1, "reading the user's own script files to fingerprint them"),
    "amptui/core/prepare/textcorpus.py": (2, "reading the text data set a preset names"),
    "amptui/trainer/data.py": (1, "reading CIFAR-10's batches (the data folder)"),
    "amptui/trainer/recording.py": (1, "torchelastic's error file (torchrun's own temporary folder)"),
    "amptui/telemetry/outbound.py": (2, "the Kubeflow token file (the credential path, outside runs); "
                                        "urllib's opener.open(request) is a request"),
    "amptui/monitor.py": (1, "Opening.open(run_dir, config): a method, not a file"),
}


def opens_in(path: Path) -> list[int]:
    """The lines of `path` that call write_text/write_bytes, the builtin open, os.open or X.open."""
    tree = parsed(path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open" or isinstance(f, ast.Attribute) and f.attr in WRITES | {"open"}:
            found.append(node.lineno)
    return found


def test_runs_folder_files_are_opened_only_through_safefile():
    unexpected = {}
    for path in modules():
        if path == OPENER:
            continue
        name = str(path.relative_to(PACKAGE.parent))
        lines = opens_in(path)
        allowed = NOT_RUNS_FOLDER.get(name, (0, ""))[0]
        if len(lines) > allowed:
            unexpected[name] = f"{len(lines)} at lines {lines}, {allowed} allowed"
    assert unexpected == {}, ("open, create and write runs-folder files through amptui/core/safefile.py "
                              f"(or say here why a file is not in a runs folder): {unexpected}")
    assert opens_in(OPENER)  # the scan does see an open where there is one


def test_a_new_file_is_created_never_over_a_link_or_an_existing_file(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "planted").symlink_to(victim)
    with pytest.raises(FileExistsError):
        safefile.open_file(tmp_path / "planted", "x")
    with pytest.raises(FileExistsError):
        safefile.open_file(victim, "x")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(FileExistsError):
        safefile.open_file(tmp_path / "fifo", "xb")
    with safefile.open_file(tmp_path / "new.svg", "x") as out:
        out.write("<svg/>")
    assert victim.read_text() == "precious" and (tmp_path / "new.svg").read_text() == "<svg/>"
