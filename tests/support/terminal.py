"""The real CLI on a pseudo-terminal, as a person at a terminal runs it: what it drew, and an
answer typed when it asks [y/N]. Shared by the terminal-layout and the adversarial tests."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time


def amptui_on_pty(args: list[str], *, size: tuple[int, int] | None = None, answer: str | None = None,
                  timeout: float = 300) -> tuple[int, str]:
    """Run `amptui ARGS` on a pseudo-terminal (`size`: (cols, rows), with TERM set and COLUMNS/LINES
    unset so the size is the terminal's; None: the terminal's default and the caller's environment);
    when it asks [y/N], type `answer`. Returns (exit code, everything it drew)."""
    master, slave = pty.openpty()
    env = None
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-m", "amptui", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True)
    os.close(slave)
    out, answered = b"", answer is None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                data = _read(master)
                if not data:  # the terminal closed: the command is done
                    break
                out += data
                if not answered and b"[y/N]" in out:
                    os.write(master, (answer or "").encode() + b"\n")
                    answered = True
            elif proc.poll() is not None:
                # it may have written its last lines between the select and the poll: read them
                while select.select([master], [], [], 0)[0] and (data := _read(master)):
                    out += data
                break
        else:
            raise AssertionError(f"amptui {' '.join(args)} still running after {timeout} s")
        return proc.wait(timeout=60), out.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def _read(master: int) -> bytes:
    """What the terminal has for us; b"" once it closed (Linux says EIO when the other side is gone)."""
    try:
        return os.read(master, 65536)
    except OSError:
        return b""
