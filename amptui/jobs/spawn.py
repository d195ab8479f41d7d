"""The one way amptui starts a process that outlives whoever started it.

Nothing of amptui but core.safefile (core's launcher imports it): a new session (setsid), so closing the
terminal or quitting the dashboard never takes it down; stdin from /dev/null; stdout and stderr
appended to a log file. And the one way amptui names the Python that runs `-m amptui...`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from amptui.core import safefile

# `python -m amptui...` puts the working folder first on the import path, so an `amptui/` there
# would run instead of amptui (as the user, in every tab of `amptui serve`). -P (Python 3.11+)
# leaves it off and keeps PYTHONPATH and the user's site-packages; 3.10 has only -I, which drops
# those too. User code that relies on the working folder (a preset's model.factory, a script's
# own folder) puts it back itself, after amptui is imported (core/prepare/usercode.py, trainer/scriptrun.py).
SAFE_PATH = "-P" if sys.version_info >= (3, 11) else "-I"


def forget_working_folder(env: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Drop the entries of PYTHONPATH that name the working folder from `env` (in place): an empty
    one (`export PYTHONPATH=$PYTHONPATH:/x` with nothing before) or `.` puts it back on the path of
    every Python amptui starts, -P or not, and a `sitecustomize.py` there runs before any of amptui.
    Other entries stay, relative ones made absolute (`PYTHONPATH=examples` names a folder on purpose;
    the same folder for every child, which starts in this working folder)."""
    entries = env.get("PYTHONPATH")
    if entries is None:
        return
    here = os.path.realpath(os.getcwd())
    kept = [os.path.abspath(entry) for entry in entries.split(os.pathsep)
            if entry and os.path.realpath(entry) != here]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(kept))
    else:
        del env["PYTHONPATH"]


def hear_interrupts() -> None:
    """Ctrl-C (SIGINT) is amptui's "stop gracefully": take it back whatever this process inherited.
    A shell without job control (`amptui run ... &` in a script, `ssh box 'amptui ab ... &'`) starts
    its background commands with SIGINT ignored, and Python then installs no handler of its own, so a
    driver would train through every SIGINT. Every amptui process whose protocol is SIGINT calls this
    first; the processes it starts are amptui's too and call it in turn (exec keeps an ignored signal
    ignored). Only the main thread may set a handler; a handler someone else set is left alone."""
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def amptui_python(*flags: str) -> list[str]:
    """This Python with `flags`, started so that nothing is imported from the working folder:
    what every `python -m amptui...` amptui starts begins with. (The CLI calls forget_working_folder
    as it starts, so the environment every child inherits is already clean; this is for the rest.)"""
    forget_working_folder()
    return [sys.executable, *flags, SAFE_PATH]


def spawn(command: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None,
          pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start `command` in the background, in this directory, its output appended to `log` (a
    regular file: never a link followed out of its folder, never a FIFO that waits)."""
    with safefile.open_file(log, "ab") as out:
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=os.getcwd(), env=dict(env) if env is not None else None,
                                start_new_session=True, pass_fds=tuple(pass_fds))
