"""Home screen actions on the highlighted run: R resume, x delete (asks first), i info; and `o`,
the runs folders used (the title names the one shown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amptui.core import trust
from amptui.core.errors import UserError
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.runscache import RunsCache
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.folders import folder_choices
from amptui.dashboard.screens.home_launch import LAUNCH_GROUP
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.title import HomeTitle
from amptui.jobs import detached

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = DashboardScreen
else:
    _Screen = object


class RunActions(_Screen):
    _runs_cache: RunsCache  # the run list's reader (HomeScreen.__init__)
    _launching: bool  # a run or resume is starting (HomeScreen.__init__; LaunchActions clears it)

    if TYPE_CHECKING:  # the home screen's own, and LaunchActions'
        def refresh_runs(self) -> None: ...
        def _highlighted_info(self) -> RunInfo | None: ...
        def _child(self, args: list[str]) -> None: ...

    def _show_title(self) -> None:
        others = len(folder_choices(self.app.runs_root)) - 1   # runs folders used elsewhere: `o` lists them
        self.query_one("#home-title", HomeTitle).show(self.app.runs_display, others)  # fitted to its width

    def show_runs_folder(self) -> None:
        """The app's runs folder changed (`o`): its runs, from scratch."""
        self._runs_cache = RunsCache()
        self.query_one(RunTable).marked.clear()
        self._show_title()
        self.refresh_runs()

    def action_runs_folders(self) -> None:
        """The runs folders this user has used; the one chosen replaces the home screen's."""
        from amptui.dashboard.screens.folders import RunsFolderChooser

        def chosen(folder) -> None:
            if folder is not None:
                self.app.switch_runs_folder(folder)

        self.app.push_screen(RunsFolderChooser(self.app.runs_root), chosen)

    def action_resume(self) -> None:
        info = self._highlighted_info()
        if info is None or self._launching:
            return
        foreign = trust.foreign_code(info.path)
        if not foreign:
            self._start_resume(info.run_id, [])
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if yes:
                self._start_resume(info.run_id, [trust.TRUST_FLAG])

        self.app.push_screen(ConfirmModal(trust.question(info.run_id, foreign), yes="Resume", no="Cancel"), answer)

    def _start_resume(self, run_id: str, flags: list[str]) -> None:
        if self._launching:
            return
        self._launching = True
        self.notify(f"resuming {run_id}…", timeout=3)
        self._resume(run_id, flags)

    @in_background(LAUNCH_GROUP, "resuming the run")
    def _resume(self, run_id: str, flags: list[str]) -> None:
        """`amptui resume RUN_ID --detach`: startchecks.check_resumable (which needs torch, so not in this
        process) and launch.start(resume=True), as the CLI does. `flags`: --trust-code once the
        user said yes to the code the run names (core/trust.py)."""
        self._child(["resume", run_id, detached.DETACH, *flags, "--runs-dir", str(self.app.runs_root)])

    def action_delete(self) -> None:
        info = self._highlighted_info()
        if info is None:
            return
        if info.status == "running":
            self.notify(f"run {info.run_id} is running; stop it before deleting it (w, then s)",
                        severity="warning", timeout=6)
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            try:
                runops.delete_run(info.path, alive=self.app.process_alive)
            except (UserError, OSError) as exc:
                self.notify(str(exc), title="Not deleted", severity="error", timeout=8)
                return
            self.notify(f"deleted run {info.run_id}")
            self.refresh_runs()

        self.app.push_screen(ConfirmModal(f"Delete run {info.run_id} ({info.preset or 'no preset'}, {info.status})?\n"
                                          f"Its folder {info.path} goes, with its checkpoints and log.",
                                          yes="Delete", no="Keep"), answer)

    def action_info(self) -> None:
        info = self._highlighted_info()
        if info is None:
            return
        from amptui.dashboard.screens.modals import RunInfoModal

        self.app.push_screen(RunInfoModal(info.path, self.app.runs_display))
