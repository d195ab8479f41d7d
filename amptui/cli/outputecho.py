"""A script's own output, live, while `amptui run --script` follows it.

The script's process writes its stdout and stderr to the run's output.log (as every run does: the
file keeps everything, and the script never depends on the terminal it was started from, so
closing it or Ctrl-C twice leaves the script running). This reads the file as it grows and passes
it on, line by line: on a terminal printed above amptui's progress line (rich prints there and
redraws the line below, as pip's and rich's own progress bars do); in a pipe the bytes go to
stdout as written, while amptui's own lines go to stderr (run_commands.attach).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, BinaryIO, Callable

from rich.console import Console
from rich.text import Text

from amptui.core import safefile

# The hooks' warnings go to output.log for the record; the terminal gets each once, from its
# warning record (cli/console.py prints those as "warning: ...").
HOOK_WARNING = b"[amptui] warning: "
HOOK_LINE = b"[amptui] "  # the hooks' other lines: amptui's, so in a pipe on amptui's stream (stderr)
READ_MAX = 1 << 20  # bytes passed on per poll: a flood of output never starves the progress line
PENDING_MAX = 1 << 16  # an unfinished line longer than this is passed on as it is


class OutputEcho:
    """Passes on what `path` gains from `offset` on: to `console` (a terminal) or, without one, to
    `out` (default: this process's stdout, as it is now: before any live display wraps it), the
    hooks' own lines, without a console, to `own` (amptui's stream: ProgressPrinter.say)."""

    def __init__(self, path: Path, offset: int, console: Console | None, out: BinaryIO | None = None,
                 own: Callable[[str], None] | None = None):
        self.path, self.offset, self.console = Path(path), offset, console
        self.out = out if out is not None else sys.stdout.buffer
        self.own = own
        self.pending = b""  # a line not ended yet
        self._file: IO[bytes] | None = None

    def poll(self, final: bool = False) -> None:
        """Pass on the whole lines written since the last call (`final`: all of it, to the end of
        the file, an unfinished last line too)."""
        while True:
            data = self._read()
            more = final and len(data) == READ_MAX
            lines = (self.pending + data).split(b"\n")
            self.pending = _last_state(lines.pop())
            if final and not more and self.pending or len(self.pending) > PENDING_MAX:
                lines.append(self.pending)
                self.pending = b""
            self._show(lines)
            if not more:
                return

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read(self) -> bytes:
        if self._file is None:
            try:  # never a link followed out of the folder, never a FIFO that waits
                self._file = safefile.open_file(self.path, "rb")
            except OSError:
                return b""  # not there yet
            self._file.seek(self.offset)
        try:
            data = self._file.read(READ_MAX) or b""
        except OSError:
            return b""
        self.offset += len(data)
        return data

    def _show(self, lines: list[bytes]) -> None:
        lines = [line for line in lines if not line.startswith(HOOK_WARNING)]
        if not lines:
            return
        if self.console is None:
            own = self.own
            theirs = lines if own is None else [line for line in lines if not line.startswith(HOOK_LINE)]
            if theirs:
                self.out.write(b"".join(line + b"\n" for line in theirs))
                self.out.flush()
            if own is not None:
                for line in lines:
                    if line.startswith(HOOK_LINE):
                        own(line.decode("utf-8", "replace"))
            return
        # a carriage return redraws a line in place (tqdm): above a live display, its last state
        text = "\n".join(line.rstrip(b"\r").rsplit(b"\r", 1)[-1].decode("utf-8", "replace") for line in lines)
        self.console.print(Text.from_ansi(text), soft_wrap=True)


def _last_state(unfinished: bytes) -> bytes:
    """A line redrawn in place with carriage returns (tqdm's bar, for a whole epoch): only its
    latest state is kept until its newline comes (a trailing one may still be a "\r\n")."""
    head, cr, tail = unfinished.rpartition(b"\r")
    return tail if cr and tail else unfinished
