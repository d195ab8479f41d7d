"""Taking turns (`amptui ab --interleave`): the variants' trainers run side by side, but only the one
whose turn it is trains; at each step record it hands the turn to the next. Every variant's timed
windows are then spread over the same stretch of time, one after another, so a slow drift of the
machine's speed (a neighbour's job, heat, a frequency governor) falls on all of them alike instead
of on whichever ran last (benchmarks/loop_overhead.py alternates its loops the same way in one
process). The waiting is kept out of the step clock by the trainer.

The turn file holds one line, "TURN ALIVE,ALIVE,...": the index of the variant whose turn it is and
the indices still taking part. Every change is read-modify-write under an exclusive flock of the file,
so the trainer handing the turn on and the A/B's driver retiring a variant that died never lose each
other's write. A missing or unreadable file ends the taking of turns (the trainer trains on alone)
rather than leaving it waiting for ever.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from amptui.core import safefile

TURN_ENV = "AMPTUI_TURN"  # "INDEX PATH": the variant's index and the group's turn file
POLL_S = 0.005            # how often a waiting trainer looks (a read of a few bytes, off the step clock)


def start(path: Path, count: int) -> None:
    """A new turn file: variant 0 first, all `count` taking part. Whatever already has its name (a
    link or a FIFO planted in the runs folder) is removed, never followed, and the file is created
    afresh (O_EXCL: one planted in between is refused, an UnsafeFile)."""
    path = Path(path)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    try:
        fd = safefile.open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode=safefile.umask_mode())
    except FileExistsError:
        raise safefile.UnsafeFile(f"{path}: made by someone else as the A/B started") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"0 {','.join(str(i) for i in range(count))}\n")


def _parse(text: str) -> tuple[int, list[int]] | None:
    try:
        turn, alive = text.split()
        return int(turn), [int(i) for i in alive.split(",") if i]
    except ValueError:
        try:  # nobody left: "TURN" alone
            return int(text.strip()), []
        except ValueError:
            return None


@contextlib.contextmanager
def _locked(path: Path, flags: int, lock: int) -> Iterator[IO[str] | None]:
    """The turn file opened (never through a link, a regular file only: a FIFO would block) and
    flocked; None when it is gone or unopenable."""
    try:
        fd = safefile.open_fd(path, flags)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "r+" if flags & os.O_RDWR else "r") as fh:
        fcntl.flock(fh.fileno(), lock)
        yield fh


def _change(path: Path, change: Callable[[int, list[int]], tuple[int, list[int]]]) -> tuple[int, list[int]] | None:
    """Apply `change` to the file's (turn, alive) under its lock; None when it is gone or unreadable."""
    with _locked(path, os.O_RDWR, fcntl.LOCK_EX) as fh:
        state = _parse(fh.read(4096)) if fh is not None else None
        if fh is None or state is None:
            return None
        turn, alive = change(*state)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{turn} {','.join(map(str, alive))}\n")
        return turn, alive


def _next(after: int, alive: list[int]) -> int:
    """The variant after `after` among those still taking part (`after` itself when it is alone)."""
    later = sorted(i for i in alive if i > after)
    return later[0] if later else (min(alive) if alive else after)


def read(path: Path) -> tuple[int, list[int]] | None:
    """(turn, alive), or None when the file is gone or unreadable."""
    with _locked(path, os.O_RDONLY, fcntl.LOCK_SH) as fh:
        return _parse(fh.read(4096)) if fh is not None else None


def retire(path: Path, index: int) -> None:
    """`index` takes no more turns (it ended, or died: the driver says so for it); the turn passes
    on if it was its."""
    def change(turn: int, alive: list[int]) -> tuple[int, list[int]]:
        left = [i for i in alive if i != index]
        return (_next(index, left) if turn == index else turn), left

    _change(path, change)


class Turns:
    """One trainer's side: `wait()` for its turn, `pass_on()` at a window's end, `retire()` at its end."""

    def __init__(self, path: Path, index: int):
        self.path, self.index = Path(path), index
        self.on = True  # False once the file is gone: train on without turns

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str] = os.environ) -> Turns | None:
        value = environ.get(TURN_ENV, "")
        index, _, path = value.partition(" ")
        return cls(Path(path), int(index)) if index.isdigit() and path else None

    def wait(self, stop: Callable[[], bool]) -> None:
        """Until it is this variant's turn, `stop()` says to stop, or the turn file is gone."""
        while self.on:
            state = read(self.path)
            if state is None:
                self.on = False
                return
            if self.index not in state[1]:  # retired for it (the driver took it for dead): train alone
                self.on = False
                return
            if state[0] == self.index or stop():
                return
            time.sleep(POLL_S)

    def pass_on(self) -> None:
        """The turn to the next variant (only when it is this one's: a trainer told to stop while it
        waited trains its last window out of turn and must not take the turn from its holder)."""
        def change(turn: int, alive: list[int]) -> tuple[int, list[int]]:
            return (_next(self.index, alive) if turn == self.index else turn), alive

        if self.on and _change(self.path, change) is None:
            self.on = False

    def retire(self) -> None:
        if self.on:
            retire(self.path, self.index)
            self.on = False
