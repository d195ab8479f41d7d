"""A tiny terminal for the dashboard benchmarks: runs a command in a pseudo-terminal of a fixed
size, answers the one query Textual needs answered, counts frames and keeps the screen.

Frames: Textual 8 asks the terminal whether it supports synchronized output (DECRQM
`ESC [ ? 2026 $ p`). We answer "supported" (`ESC [ ? 2026 ; 2 $ y`), so from then on Textual
wraps every frame it writes in `ESC [ ? 2026 h` ... `ESC [ ? 2026 l` (App._begin_update /
_end_update around App._display). Counting the `ESC [ ? 2026 h` marks counts the redraws exactly,
from outside the process.

Screen: the raw output is kept and fed to `pyte` (a VT100 emulator; `pip install pyte`, a
benchmark-only dependency) on demand, so the emulator costs nothing while the dashboard is being
measured unless the caller asks for the screen.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import termios
import threading
import time

SYNC_START = b"\x1b[?2026h"
SYNC_END = b"\x1b[?2026l"
SYNC_QUERY = b"\x1b[?2026$p"
SYNC_REPLY = b"\x1b[?2026;2$y"  # mode 2026 known, currently reset: "supported"


def _child_setup() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty becomes the child's controlling terminal


class PtyTerm:
    def __init__(self, argv: list[str], cols: int = 110, rows: int = 34, env: dict | None = None,
                 cwd: str | None = None, answer_sync: bool = True):
        import pyte

        self.cols, self.rows = cols, rows
        self.answer_sync = answer_sync
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        full_env = dict(os.environ if env is None else env)
        full_env.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        full_env.pop("TMUX", None)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full_env, cwd=cwd,
                                     preexec_fn=_child_setup, close_fds=True)
        os.close(slave)
        self.pid = self.proc.pid
        self.lock = threading.Lock()
        self.raw = bytearray()          # everything the program wrote
        self.frames = 0                 # ESC[?2026h seen
        self.frame_times: list[float] = []  # monotonic time of each frame start
        self.sync_answered = False
        self.first_output: float | None = None  # monotonic time of the first byte written
        self._fed = 0
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # --- output ---------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        carry = query_carry = b""
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                break
            if not data:
                break
            now = time.monotonic()
            if self.first_output is None:
                self.first_output = now
            scan = carry + data
            n = scan.count(SYNC_START)
            query_scan = query_carry + data  # the query is longer than the frame mark: its own carry
            query_carry = query_scan[-(len(SYNC_QUERY) - 1):]
            if self.answer_sync and not self.sync_answered and SYNC_QUERY in query_scan:
                self.sync_answered = True
                try:
                    os.write(self.master, SYNC_REPLY)
                except OSError:
                    pass
            with self.lock:
                self.raw += data
                if n:
                    self.frames += n
                    self.frame_times.extend([now] * n)
            carry = scan[-(len(SYNC_START) - 1):]
        self._closed = True

    def text(self) -> str:
        """The screen as it is now (feeds the emulator what arrived since the last call)."""
        with self.lock:
            chunk = bytes(self.raw[self._fed:])
            self._fed = len(self.raw)
        if chunk:
            self.stream.feed(chunk)
        return "\n".join(self.screen.display)

    def wait_for(self, predicate, timeout: float, poll: float = 0.02):
        """Poll the screen until predicate(text) is truthy; returns (value, seconds since spawn) or
        (None, None) on timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate(self.text())
            if value:
                return value, time.monotonic() - self.t0
            if self.proc.poll() is not None and not value:
                value = predicate(self.text())
                return (value, time.monotonic() - self.t0) if value else (None, None)
            time.sleep(poll)
        return None, None

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    # --- end ------------------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Quit politely (q), then SIGTERM, then SIGKILL; always reaps the child."""
        if self.proc.poll() is None:
            try:
                self.send(b"q")
                self.proc.wait(timeout=timeout / 2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout / 2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass
        self._reader.join(timeout=2)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM (peak RSS) in bytes from /proc/<pid>/status."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def describe_amptui() -> str:
    """Which amptui the benchmark measures: where it is imported from (PYTHONPATH=<checkout> picks
    another one) and, for a git checkout, its commit and whether amptui/ has uncommitted edits."""
    import sys

    try:
        where = subprocess.run([sys.executable, "-c", "import amptui, os; print(os.path.dirname(amptui.__file__))"],
                               capture_output=True, text=True, timeout=30, cwd="/").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "amptui: not importable"
    top = os.path.dirname(where)
    try:
        head = subprocess.run(["git", "-C", top, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return f"amptui from {where} (not a git checkout)"
        dirty = subprocess.run(["git", "-C", top, "status", "--porcelain", "--", "amptui"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return f"amptui from {where} at commit {head.stdout.strip()}" + (
            " + uncommitted edits in amptui/" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return f"amptui from {where}"
