"""What the screens and widgets ask of the app, as a typed protocol: they see this, never app.py.

app.py imports every screen (to open them); a screen that imported app.py back, even for its types
only, closed a circle through eleven files. `Dashboard` lists what the dashboard adds to Textual's
App (the runs folder, the clocks tests replace, navigation); `AmptuiApp` is its one implementation
(app.py checks it), and `DashboardApp` is Textual's App with these added, for `self.app`'s type.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol


class Dashboard(Protocol):
    runs_root: Path          # resolved; where runs are listed and started
    runs_display: str        # as the user gave it, for titles
    read_only: bool          # watches and compares, starts nothing (screens/keys.py why_off)
    clock: Callable[[], float]                # time.time, or a test's frozen clock
    process_alive: Callable[[dict], bool]     # is a run's recorded process still running

    def from_thread(self, callback: Callable[..., Any], *args: Any) -> None:
        """call_from_thread that is quiet when the worker was cancelled or the app is closing."""

    def open_run(self, run_dir: Path) -> None: ...

    def open_compare(self, run_dirs: list[Path]) -> None: ...

    def compare_with(self, run_dir: Path) -> None:
        """This run against the runs marked on home, or else the latest other run of its preset."""

    def go_home(self) -> None: ...

    def switch_runs_folder(self, folder: Path) -> None: ...

    def presets_changed(self) -> None:
        """A preset was saved or deleted elsewhere: the home screen lists the presets again."""


if TYPE_CHECKING:
    from textual.app import App

    class DashboardApp(App[None], Dashboard):
        """For the type checker only (`app: DashboardApp` on a screen): Textual's App plus the above."""
