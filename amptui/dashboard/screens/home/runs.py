"""Home screen actions on the highlighted run: R resume, x delete (asks first), i info; and `o`,
the runs folders used (the title names the one shown). HomeRunActions is the home screen's part that
does them; a resume starts through the screen's launches (one start at a time)."""

from __future__ import annotations

from collections.abc import Callable

from amptui.core import trust
from amptui.core.errors import UserError
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.screens.folders import folder_choices
from amptui.dashboard.screens.home.launch import HomeLaunches
from amptui.dashboard.widgets.title import HomeTitle


class HomeRunActions:
    """R, x, i and o of `screen`, the home screen: `highlighted` is the run highlighted in Runs (None:
    none), `refresh_runs` reads the run list again, `launches` starts a resume."""

    def __init__(self, screen: DashboardScreen, launches: HomeLaunches,
                 highlighted: Callable[[], RunInfo | None], refresh_runs: Callable[[], None]) -> None:
        self.screen = screen
        self.launches = launches
        self.highlighted = highlighted
        self.refresh_runs = refresh_runs

    def show_title(self) -> None:
        others = len(folder_choices(self.screen.app.runs_root)) - 1   # runs folders used elsewhere: `o` lists them
        self.screen.query_one("#home-title", HomeTitle).show(self.screen.app.runs_display, others)  # fitted to its width

    def runs_folders(self) -> None:
        """The runs folders this user has used; the one chosen replaces the home screen's."""
        from amptui.dashboard.screens.folders import RunsFolderChooser

        app = self.screen.app

        def chosen(folder) -> None:
            if folder is not None:
                app.switch_runs_folder(folder)

        app.push_screen(RunsFolderChooser(app.runs_root), chosen)

    def resume(self) -> None:
        info = self.highlighted()
        if info is None or self.launches.launching:
            return
        foreign = trust.foreign_code(info.path)
        if not foreign:
            self.launches.resume(info.run_id, [])
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if yes:
                self.launches.resume(info.run_id, [trust.TRUST_FLAG])

        self.screen.app.push_screen(ConfirmModal(trust.question(info.run_id, foreign), yes="Resume", no="Cancel"),
                                    answer)

    def delete(self) -> None:
        info = self.highlighted()
        if info is None:
            return
        if info.status == "running":
            self.screen.notify(f"run {info.run_id} is running; stop it before deleting it (w, then s)",
                               severity="warning", timeout=6)
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            try:
                runops.delete_run(info.path, alive=self.screen.app.process_alive)
            except (UserError, OSError) as exc:
                self.screen.notify(str(exc), title="Not deleted", severity="error", timeout=8)
                return
            self.screen.notify(f"deleted run {info.run_id}")
            self.refresh_runs()

        self.screen.app.push_screen(ConfirmModal(f"Delete run {info.run_id} ({info.preset or 'no preset'}, "
                                                 f"{info.status})?\nIts folder {info.path} goes, with its "
                                                 "checkpoints and log.", yes="Delete", no="Keep"), answer)

    def info(self) -> None:
        info = self.highlighted()
        if info is None:
            return
        from amptui.dashboard.screens.modals import RunInfoModal

        self.screen.app.push_screen(RunInfoModal(info.path, self.screen.app.runs_display))
