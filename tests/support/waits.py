"""Waiting on a condition (never a fixed pause): a generous deadline only a broken build reaches."""

from __future__ import annotations

import time


def wait_until(condition, timeout: float, what: str, step: float = 0.1) -> None:
    """Poll `condition` until it holds; a generous deadline only a broken build reaches."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(step)
