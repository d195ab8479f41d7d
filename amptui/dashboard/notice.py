"""A notice to show: what the plain functions behind the screens return, for the screen to say
(`DashboardScreen.say`), so that they need no screen and no app to say it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    message: str
    title: str = ""
    severity: Severity = "information"
    timeout: float | None = None  # seconds; None: Textual's default


def refused(message: str, title: str, timeout: float = 10) -> Notice:
    """Why something was not done, as an error notice titled `title`."""
    return Notice(message, title=title, severity="error", timeout=timeout)
