"""What the run's status means on the run screen: the panel under the header for a failed, killed or
stopped run (RunStatusPanel), and the controls that depend on the status: stop (s), resume (R), run
info (i). The run screen's keys call the panel's `stop`, `resume` and `info`; the panel says when
which keys apply has changed (KeysChanged), and the screen refreshes its footer (the screen's
`refusal` asks the panel, so a key that does not apply says why when pressed anyway)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from amptui.core.errors import UserError
from amptui.core.fmt import shown as escaped
from amptui.core.run import runops, trust
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.screens.base import in_background, say_failure
from amptui.dashboard.screens.modals import ConfirmModal, RunInfoModal
from amptui.jobs import detached, launch

if TYPE_CHECKING:
    from amptui.dashboard.shell import DashboardApp

TRACEBACK_LINES = 6  # of a failed run's traceback, under its error (2 in the compact layout)


class RunStatusPanel(Static):
    if TYPE_CHECKING:
        app: DashboardApp  # self.app is the dashboard's app (from_thread, runs_display)

    class KeysChanged(Message):
        """Which of s / R apply has changed: the screen refreshes its footer."""

    def __init__(self, run_dir: Path, model: RunModel) -> None:
        super().__init__(id="error-panel")
        self.run_dir = run_dir
        self.model = model
        self._stopping = False  # a stop was asked and has not answered yet
        self._resuming = False  # a resume is starting
        self._status_seen: tuple | None = None  # (status, loading, stopping) the keys were last worked out for
        self._resume_refusal: str | None = "the run has not been read yet"  # why R does not apply now (None: it does)
        self._failure_said: tuple[str, str] | None = None  # the last failure shown (say_failure)

    def _keys_changed(self) -> None:
        self.post_message(self.KeysChanged())

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
            self._resume_refusal = f"run {m.run.run_id} is running; it needs no resume"
        else:
            try:
                self._resume_refusal = runops.resume_refusal(self.run_dir)
            except (OSError, UserError) as exc:
                self._resume_refusal = str(exc)
        self._keys_changed()

    def show(self, compact: bool, width: int) -> None:
        """A failed run's error and the end of its traceback; a killed or stopped one, and whether R
        resumes it (`compact`: the 80x24 layout, two traceback lines; `width`: the screen's)."""
        m = self.model
        self._status_changed()
        panel = self
        if m.damaged:
            panel.update(Text.assemble(("✗ damaged", "bold red"), f": cannot read the event file ({m.damaged})"))
            panel.display = True
            panel.set_class(True, "-failed")
        elif m.status == "failed":
            err = m.run.error or {}
            lines = str(err.get("traceback") or "").rstrip().splitlines()
            width = max(20, width - 6)
            shown = lines[-(2 if compact else TRACEBACK_LINES):]
            tail = [line if len(line) <= width else line[: width - 1] + "…" for line in map(escaped, shown)]
            rank = err.get("rank")
            panel.update(Text.assemble(
                ("✗ run failed", "bold red"), f" at step {(m.run.end or {}).get('steps', m.run.step)}",
                f" (rank {rank})" if rank is not None else "", ": ",
                (escaped(f"{err.get('type', 'Error')}: {err.get('message', '')}"), "bold"),
                "\n" if tail else "", ("\n".join(tail), "dim")))
            panel.display = True
            panel.set_class(True, "-failed")
        elif m.status == "killed":
            panel.update(Text.assemble(("✗ the trainer process is gone", "bold red"),
                                       f" without an end record (killed, or it died before it could write one) after step {m.run.step}. "
                                       "Its output is "
                                       f"in {self.run_dir / 'output.log'}; ", self._resume_hint()))
            panel.display = True
        elif m.status == "stopped":
            panel.update(Text.assemble(("■ stopped", "bold yellow"), f" at step {m.run.step}; ", self._resume_hint()))
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
            return Text.assemble("R continues it (or: amptui resume ", self.model.run.run_id, ")")
        return Text(f"no resume: {self._resume_refusal}", style="dim")

    def stop(self) -> None:
        def answer(yes: bool | None) -> None:
            if yes:
                self._stopping = True
                self._keys_changed()
                self.notify("stopping: the run writes a checkpoint, then ends", timeout=4)
                self._stop()

        self.app.push_screen(ConfirmModal(f"Stop run {self.model.run.run_id}?\nIt writes a checkpoint and ends "
                                          "with status stopped (resume it later with amptui resume).",
                                          yes="Stop", no="Keep running"), answer)

    @in_background("run-stop", "stopping the run")
    def _stop(self) -> None:
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

    def resume(self) -> None:
        foreign = trust.foreign_code(self.run_dir)
        if not foreign:
            self._start_resume([])
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._start_resume([trust.TRUST_FLAG])

        self.app.push_screen(ConfirmModal(trust.question(self.model.run.run_id, foreign), yes="Resume", no="Cancel"),
                             answer)

    def _start_resume(self, flags: list[str]) -> None:
        if self._resuming:
            return
        self._resuming = True
        self._keys_changed()
        self.notify(f"resuming {self.model.run.run_id}…", timeout=3)
        self._resume(flags)

    @in_background("run-resume", "resuming the run")
    def _resume(self, flags: list[str]) -> None:
        """`amptui resume RUN_ID --detach` (startchecks.check_resumable + start(resume=True)); the tail
        picks up the new session's records on this screen. `flags`: --trust-code once the user said
        yes to the code the run names (core/run/trust.py)."""
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
        self._keys_changed()

    def info(self) -> None:
        self.app.push_screen(RunInfoModal(self.run_dir, self.app.runs_display))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A stop or resume that failed before its reply: s and R apply again, and the failure is said."""
        worker = event.worker
        if event.state != WorkerState.ERROR or worker.error is None:
            return
        self._failure_said = say_failure(self, worker, self._failure_said)
        if worker.group in ("run-stop", "run-resume"):
            if worker.group == "run-stop":
                self._stopping = False
            else:
                self._resuming = False
            self._status_seen = None
            self._keys_changed()
