"""The run screen's controls that depend on the run's status: stop (s), resume (R), run info (i).

Which of them apply follows the status (KeysMixin hides the others from the footer and says why
when one is pressed anyway)."""

from __future__ import annotations

from rich.text import Text
from textual import work

from ...core import runops
from ...core.errors import UserError


class RunControls:
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
        from .modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if yes:
                self._stopping = True
                self.refresh_bindings()
                self.notify("stopping: the run writes a checkpoint, then ends", timeout=4)
                self._stop()

        self.app.push_screen(ConfirmModal(f"Stop run {self.model.run_id}?\nIt writes a checkpoint and ends "
                                          "with status stopped (resume it later with amptui resume).",
                                          yes="Stop", no="Keep running"), answer)

    @work(thread=True, exclusive=True, group="run-stop")
    def _stop(self) -> None:
        from ...core import launch

        try:
            info = launch.stop(self.run_dir, wait_s=60)
            message, severity = f"run {info.run_id}: {info.status} at step {info.step}", "information"
        except UserError as exc:
            message, severity = str(exc), "error"
        self.app.from_thread(self._stopped, message, severity)

    def _stopped(self, message: str, severity: str) -> None:
        self._stopping = False
        self._status_seen = None
        self.notify(message, severity=severity)

    def action_resume(self) -> None:
        self._resuming = True
        self.refresh_bindings()
        self.notify(f"resuming {self.model.run_id}…", timeout=3)
        self._resume()

    @work(thread=True, exclusive=True, group="run-resume")
    def _resume(self) -> None:
        """`amptui resume RUN_ID --detach` (launch.check_resumable + start(resume=True)); the tail
        picks up the new session's records on this screen."""
        from ..launcher import amptui_detached

        run_id, error = amptui_detached(["resume", self.run_dir.name, "--detach", "--runs-dir",
                                         str(self.run_dir.parent)])
        self.app.from_thread(self._resumed, run_id, error)

    def _resumed(self, run_id: str | None, error: str | None) -> None:
        self._resuming = False
        self._status_seen = None
        if error:
            self.notify(error, title="Resume refused", severity="error", timeout=10)
        else:
            self.notify(f"run {run_id} resumed from its last checkpoint")
        self.refresh_bindings()

    def action_info(self) -> None:
        from .modals import RunInfoModal

        self.app.push_screen(RunInfoModal(self.run_dir, getattr(self.app, "runs_display", None)))
