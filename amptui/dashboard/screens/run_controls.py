"""What the run's status means on the run screen: the panel under the header for a failed, killed or
stopped run, and the controls that depend on the status: stop (s), resume (R), run info (i).

Which of them apply follows the status (KeysMixin hides the others from the footer and says why
when one is pressed anyway)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.notifications import SeverityLevel
from textual.widgets import Static
from textual.worker import Worker

from amptui.core.errors import UserError
from amptui.core.fmt import shown as escaped
from amptui.core.run import runops
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.screens.base import DashboardScreen, in_background

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = DashboardScreen
else:
    _Screen = object

TRACEBACK_LINES = 6  # of a failed run's traceback, under its error (2 in the compact layout)


class RunControls(_Screen):
    # what it reads and sets on its run screen (RunScreen.__init__ sets them)
    run_dir: Path
    model: RunModel
    _stopping: bool  # a stop was asked and has not answered yet
    _resuming: bool  # a resume is starting
    _status_seen: tuple | None  # (status, loading, stopping) the keys were last worked out for
    _resume_refusal: str | None  # why R does not apply now (None: it does)

    def _status_changed(self) -> None:
        """Which keys apply follows the run's status (s while running, R when a resume would work)."""
        m = self.model
        seen = (m.status, m.loading, self._stopping)
        if seen == self._status_seen:
            return
        self._status_seen = seen
        if m.loading:
            self._resume_refusal = "the run is still being read"
        elif m.status == "running":
            self._resume_refusal = f"run {m.run_id} is running; it needs no resume"
        else:
            try:
                self._resume_refusal = runops.resume_refusal(self.run_dir)
            except (OSError, UserError) as exc:
                self._resume_refusal = str(exc)
        self.refresh_bindings()

    def _status_panel(self) -> None:
        """A failed run's error and the end of its traceback; a killed or stopped one, and whether R resumes it."""
        m = self.model
        self._status_changed()
        panel = self.query_one("#error-panel", Static)
        if m.damaged:
            panel.update(Text.assemble(("✗ damaged", "bold red"), f": cannot read the event file ({m.damaged})"))
            panel.display = True
            panel.set_class(True, "-failed")
        elif m.status == "failed":
            err = m.error or {}
            lines = str(err.get("traceback") or "").rstrip().splitlines()
            width = max(20, self.size.width - 6)
            shown = lines[-(2 if self.has_class("-compact") else TRACEBACK_LINES):]
            tail = [line if len(line) <= width else line[: width - 1] + "…" for line in map(escaped, shown)]
            rank = err.get("rank")
            panel.update(Text.assemble(
                ("✗ run failed", "bold red"), f" at step {(m.end or {}).get('steps', m.step)}",
                f" (rank {rank})" if rank is not None else "", ": ",
                (escaped(f"{err.get('type', 'Error')}: {err.get('message', '')}"), "bold"),
                "\n" if tail else "", ("\n".join(tail), "dim")))
            panel.display = True
            panel.set_class(True, "-failed")
        elif m.status == "killed":
            panel.update(Text.assemble(("✗ the trainer process is gone", "bold red"),
                                       f" without an end record (killed, or it died before it could write one) after step {m.step}. "
                                       "Its output is "
                                       f"in {self.run_dir / 'output.log'}; ", self._resume_hint()))
            panel.display = True
        elif m.status == "stopped":
            panel.update(Text.assemble(("■ stopped", "bold yellow"), f" at step {m.step}; ", self._resume_hint()))
            panel.display = True
            panel.set_class(False, "-failed")
        else:
            panel.display = False

    def refusal(self, action: str) -> str | None:
        if action == "stop":
            if self._stopping:
                return "already stopping…"
            if self.model.status != "running":
                return f"the run is not running ({self.model.status})"
        if action == "resume":
            if self._resuming:
                return "already resuming…"
            return self._resume_refusal
        return None

    def _resume_hint(self) -> Text:
        """A resume is suggested only when it would be accepted; otherwise the reason."""
        if self._resume_refusal is None:
            return Text.assemble("R continues it (or: amptui resume ", self.model.run_id, ")")
        return Text(f"no resume: {self._resume_refusal}", style="dim")

    def action_stop(self) -> None:
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if yes:
                self._stopping = True
                self.refresh_bindings()
                self.notify("stopping: the run writes a checkpoint, then ends", timeout=4)
                self._stop()

        self.app.push_screen(ConfirmModal(f"Stop run {self.model.run_id}?\nIt writes a checkpoint and ends "
                                          "with status stopped (resume it later with amptui resume).",
                                          yes="Stop", no="Keep running"), answer)

    @in_background("run-stop", "stopping the run")
    def _stop(self) -> None:
        from amptui.jobs import launch

        severity: SeverityLevel
        try:
            info = launch.stop(self.run_dir, wait_s=60)
            message, severity = f"run {info.run_id}: {info.status} at step {info.step}", "information"
        except UserError as exc:
            message, severity = str(exc), "error"
        self.app.from_thread(self._stopped, message, severity)

    def _stopped(self, message: str, severity: SeverityLevel) -> None:
        self._stopping = False
        self._status_seen = None
        self.notify(message, severity=severity)

    def action_resume(self) -> None:
        from amptui.core import trust

        foreign = trust.foreign_code(self.run_dir)
        if not foreign:
            self._start_resume([])
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if yes:
                self._start_resume([trust.TRUST_FLAG])

        self.app.push_screen(ConfirmModal(trust.question(self.model.run_id, foreign), yes="Resume", no="Cancel"),
                             answer)

    def _start_resume(self, flags: list[str]) -> None:
        if self._resuming:
            return
        self._resuming = True
        self.refresh_bindings()
        self.notify(f"resuming {self.model.run_id}…", timeout=3)
        self._resume(flags)

    @in_background("run-resume", "resuming the run")
    def _resume(self, flags: list[str]) -> None:
        """`amptui resume RUN_ID --detach` (startchecks.check_resumable + start(resume=True)); the tail
        picks up the new session's records on this screen. `flags`: --trust-code once the user said
        yes to the code the run names (core/trust.py)."""
        from amptui.jobs import detached

        started, error = detached.start(["resume", self.run_dir.name, detached.DETACH, *flags, "--runs-dir",
                                         str(self.run_dir.parent)])
        self.app.from_thread(self._resumed, started["run_id"] if started else None, error)

    def _resumed(self, run_id: str | None, error: str | None) -> None:
        self._resuming = False
        self._status_seen = None
        if error:
            self.notify(error, title="Resume refused", severity="error", timeout=10)
        else:
            self.notify(f"run {run_id} resumed from its last checkpoint")
        self.refresh_bindings()

    def action_info(self) -> None:
        from amptui.dashboard.screens.modals import RunInfoModal

        self.app.push_screen(RunInfoModal(self.run_dir, self.app.runs_display))

    def worker_failed(self, worker: Worker) -> None:
        """A stop or resume that failed before its reply: s and R apply again."""
        if worker.group in ("run-stop", "run-resume"):
            if worker.group == "run-stop":
                self._stopping = False
            else:
                self._resuming = False
            self._status_seen = None
            self.refresh_bindings()
