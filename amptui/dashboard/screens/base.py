"""What every dashboard screen shares: a background task that fails is shown, and the app goes on.

Screens start their thread workers with `in_background` (exit_on_error=False, as harlequin does);
an exception a worker raises then reaches `on_worker_state_changed` below instead of closing the
app. The one handler lets the screen undo what the worker's reply would have undone
(`worker_failed`: a "starting…" flag, say), then says what failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from amptui.dashboard.notice import Notice
from amptui.dashboard.screens.keys import why_off

if TYPE_CHECKING:
    from textual.widget import Widget

    from amptui.dashboard.shell import DashboardApp


def in_background(group: str, name: str):
    """A thread worker, one at a time per `group` (a new one cancels the last); `name` says what it
    does, in the notice shown when it fails."""
    return work(thread=True, exclusive=True, exit_on_error=False, group=group, name=name)


def say_failure(node: Widget, worker: Worker, last: tuple[str, str] | None) -> tuple[str, str]:
    """Say what a failed worker of `node` (a screen, or a widget with workers of its own) failed at,
    unless it is `last`, the failure said before (a loader failing on every tick is said once).
    Returns the failure, for the next call's `last`."""
    error = worker.error
    said = (worker.name, f"{type(error).__name__}: {error}")
    if said == last:
        return said
    node.notify(f"{type(error).__name__}: {error}", title=f"{worker.name or 'a background task'} failed",
                severity="error", timeout=10, markup=False)
    return said


class DashboardScreen(Screen):
    """Every dashboard screen: failed workers said (above), and keys shown only where they apply
    (screens/keys.py): a screen says in `refusal(action)` why an action does not apply now."""
    if TYPE_CHECKING:
        app: DashboardApp  # self.app is the dashboard's app (runs_root, from_thread, ...)
    _failure_said: tuple[str, str] | None = None  # the last failure shown (worker name, error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR or worker.error is None:
            return
        self.worker_failed(worker)
        self._failure_said = say_failure(self, worker, self._failure_said)

    def refusal(self, action: str) -> str | None:
        """Why `action` does not apply now (None: it does)."""
        return None

    def ask(self, modal: Screen[Any], then: Callable[[Any], object]) -> None:
        """Open `modal`; `then(answer)` once it is answered (not when it is cancelled: None, False)."""
        def answered(answer: Any) -> None:
            if answer is not None and answer is not False:
                then(answer)

        self.app.push_screen(modal, answered)

    def say(self, *notices: Notice | None) -> None:
        """Show what a plain function returned to say (amptui/dashboard/notice.py)."""
        for n in notices:
            if n is not None:
                self.notify(n.message, title=n.title, severity=n.severity, timeout=n.timeout)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "why_not":
            return True
        return why_off(self, action) is None

    def action_why_not(self, action: str) -> None:
        reason = why_off(self, action)
        if reason:
            self.notify(reason, severity="warning", timeout=6)

    def worker_failed(self, worker: Worker) -> None:
        """Undo what the failed worker's reply would have undone (by its `worker.group`)."""
