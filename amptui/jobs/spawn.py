"""The one way amptui starts a process that outlives whoever started it.

Nothing of amptui but core.safefile (core's launcher imports it): a new session (setsid), so closing the
terminal or quitting the dashboard never takes it down; stdin from /dev/null; stdout and stderr
appended to a log file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from amptui.core import safefile


def spawn(command: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None,
          pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start `command` in the background, in this directory, its output appended to `log` (a
    regular file: never a link followed out of its folder, never a FIFO that waits)."""
    with safefile.open_file(log, "ab") as out:
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=os.getcwd(), env=dict(env) if env is not None else None,
                                start_new_session=True, pass_fds=tuple(pass_fds))
