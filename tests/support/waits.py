"""Waiting on a condition (never a fixed pause): a generous deadline only a broken build reaches."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], timeout: float, what: str | Callable[[], str],
               step: float = 0.1) -> Any:
    """Poll `condition` until it holds and return what it returned (the run found, the file read);
    past the deadline an AssertionError says `what` was waited for (a callable: worked out then,
    e.g. with the log so far)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what() if callable(what) else what}")
        time.sleep(step)
    return value


def gone(pid: int) -> bool:
    """The process has ended (a zombie its parent has not reaped yet counts as ended)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
