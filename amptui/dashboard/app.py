"""The amptui dashboard: `amptui` opens the home screen, `amptui watch RUN_ID` a run screen.

Imports only amptui.core and Textual (never torch or the trainer): it opens fast and stays small.
Runs are started as separate, detached processes, so quitting never stops them.
"""

from __future__ import annotations

import asyncio
import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import NoActiveWorker, get_current_worker

from amptui.core import statedir, userconfig
from amptui.core.fmt import shown
from amptui.core.run.runs import list_runs
from amptui.core.run.runs import process_alive as _process_alive
from amptui.core.run.runs import runs_root as _runs_root
from amptui.dashboard.keymap import check_keymap, keys_of, named_bindings
from amptui.dashboard.picture import SETTLE_S, screen_svg
from amptui.dashboard.screens.compare.screen import CompareScreen
from amptui.dashboard.screens.help import HelpScreen
from amptui.dashboard.screens.home.screen import HomeScreen
from amptui.dashboard.screens.keys import READ_ONLY_ENV, named, why_off
from amptui.dashboard.screens.plan.screen import PlanScreen
from amptui.dashboard.screens.run.screen import RunScreen
from amptui.dashboard.screens.tune.screen import TuneScreen
from amptui.dashboard.widgets.runtable import RunTable

if TYPE_CHECKING:
    from textual.theme import Theme

    from amptui.dashboard.shell import Dashboard


STATE_LIMIT = 64 * 1024


class AmptuiApp(App):
    CSS_PATH = "amptui.tcss"
    TITLE = "amptui"
    BINDINGS = named("app", [Binding("f1", "help", "Help"), Binding("question_mark", "help", "Help", show=False)])
    STATE = "dashboard.json"  # what the dashboard remembers between sessions (the theme), in the state dir
    PALETTE_SKIP = frozenset({"home.focus_presets", "run.restore"})  # escape's jobs: nothing to pick
    READ_ONLY_SYSTEM = frozenset({"Theme", "Quit", "Keys", "Maximize", "Minimize"})  # Textual's, writing nothing

    def __init__(self, runs_root: Path | str | None = None, *, watch: Path | None = None,
                 clock: Callable[[], float] = time.time,
                 process_alive: Callable[[dict], bool] = _process_alive,
                 keymap: dict[str, str] | None = None, read_only: bool | None = None):
        super().__init__()
        # watches and compares, starts nothing (screens/keys.py why_off); None: as READ_ONLY_ENV says
        self.read_only = os.environ.get(READ_ONLY_ENV) == "1" if read_only is None else read_only
        self.user_keymap = dict(keymap or {})  # action name -> keys, from amptui's config file
        self.runs_display = str(_runs_root(runs_root))  # as the user gave it, for titles
        self.runs_root = _runs_root(runs_root).resolve()
        self.watch_dir = Path(watch) if watch else None
        self.clock = clock
        self.process_alive = process_alive

    def on_mount(self) -> None:
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
        remembered = statedir.read_json(self.STATE, STATE_LIMIT)  # any JSON at all: a damaged file is no theme
        theme = remembered.get("theme") if isinstance(remembered, dict) else None
        if isinstance(theme, str) and theme in self.available_themes:
            self.theme = theme
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.push_screen(self.first_screen())

    def _remember_theme(self, theme: Theme) -> None:
        if self.read_only:
            return  # a read-only viewer writes nothing, not even its theme
        statedir.update_json(self.STATE, lambda old: {**(old if isinstance(old, dict) else {}), "theme": theme.name})

    def first_screen(self) -> Screen:
        """The screen the app opens on: the watched run's, or home."""
        if self.watch_dir is not None:
            return RunScreen(self.watch_dir, standalone=True)
        return HomeScreen()

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every notification shown as written: messages quote files and records (core/fmt.shown)."""
        super().notify(shown(message, newlines=True), title=shown(title), severity=severity, timeout=timeout,
                       markup=False)

    def from_thread(self, callback, *args) -> None:
        """call_from_thread that is quiet when the worker was cancelled or the app is closing."""
        try:
            if get_current_worker().is_cancelled:
                return
        except NoActiveWorker:
            pass
        if not self.is_running:
            return
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app closed meanwhile
            pass

    def get_system_commands(self, screen):
        """The palette (ctrl+p): every action of the screen underneath with its key, then Textual's
        own (themes, quit, ...). An action that does not apply now says why, as its key would."""
        titles = {"Keys"}  # Textual's "Keys" panel: "Keys of this screen" is ours
        for binding in named_bindings(screen):
            if binding.id in self.PALETTE_SKIP:
                continue
            keys = " / ".join(self.get_key_display(Binding(k, binding.action)) for k in keys_of(binding, self.user_keymap))
            titles.add(binding.description or binding.action)
            yield SystemCommand(binding.description or binding.action, f"key: {keys}",
                                partial(self._palette_run, screen, binding.action))
        yield SystemCommand("Keys of this screen", "every key of the current screen (key: ? or F1)", self.action_help)
        # Textual's own (themes, screenshot, ...), less those the screen already lists (its Quit); a
        # read-only dashboard keeps only those that write nothing (a screenshot is a file)
        yield from (c for c in super().get_system_commands(screen) if c.title not in titles
                    and (not self.read_only or c.title in self.READ_ONLY_SYSTEM))

    async def _palette_run(self, screen: Screen, action: str) -> None:
        refusal = why_off(screen, action.split("(")[0])
        if refusal:
            self.notify(refusal, severity="warning", timeout=6)
            return
        await screen.run_action(action)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    # --- navigation used by the screens ----------------------------------------------------------
    def home(self) -> HomeScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, HomeScreen)), None)

    def presets_changed(self) -> None:
        home = self.home()
        if home is not None:
            home.load_presets()

    def open_run(self, run_dir: Path) -> None:
        self.push_screen(RunScreen(run_dir))

    def go_home(self) -> None:
        """Leave a run screen; the run goes on. From `amptui watch` there is no home yet: open it."""
        home = self.home()
        if home is not None:
            while self.screen is not home:
                self.pop_screen()
            home.refresh_runs()
        else:
            self.switch_screen(HomeScreen())

    def switch_runs_folder(self, folder: Path) -> None:
        """Show another runs folder on the home screen (runs elsewhere go on)."""
        self.runs_root = Path(folder).resolve()
        self.runs_display = str(folder)
        home = self.home()
        if home is None:
            self.switch_screen(HomeScreen())
            return
        home.show_runs_folder()

    def open_compare(self, run_dirs: list[Path]) -> None:
        self.push_screen(CompareScreen(run_dirs))

    def compare_with(self, run_dir: Path) -> None:
        """From a run screen: this run against the runs marked on home (their first is the baseline),
        or else against the latest other run of the same preset."""
        home = self.home()
        marked = []
        if home is not None:
            marked = [m for m in home.query_one(RunTable).marked if m != run_dir.name]
        dirs = [self.runs_root / m for m in marked]
        if not dirs:
            runs = list_runs(Path(run_dir).parent)
            this = next((r for r in runs if r.run_id == run_dir.name), None)
            other = next((r for r in runs if r.run_id != run_dir.name and this is not None
                          and r.preset == this.preset and r.status != "running"), None)
            if other is None:
                self.notify("nothing to compare with: mark runs with space on the home screen",
                            severity="warning")
                return
            dirs = [other.path]
        self.open_compare(dirs + [Path(run_dir)])


if TYPE_CHECKING:  # the app is what the screens see of it (shell.py): the type checker holds it to that
    _IS_A_DASHBOARD: type[Dashboard] = AmptuiApp


def keymap_scopes() -> dict[str, type]:
    """The app and the screens a keymap names actions of, by scope ("home": HomeScreen)."""
    return {"app": AmptuiApp, "home": HomeScreen, "run": RunScreen, "compare": CompareScreen, "tune": TuneScreen,
            "plan": PlanScreen}


def make_app(runs_dir: Path | str | None = None, watch: str | Path | None = None, *,
             clock: Callable[[], float] = time.time,
             process_alive: Callable[[dict], bool] = _process_alive,
             settings: userconfig.UserConfig | None = None) -> AmptuiApp:
    """The app factory (used by the CLI, the tests and the screenshot script). `settings`: amptui's
    config file as read (default: read it now; a bad one raises ConfigError naming file and key)."""
    settings = settings if settings is not None else userconfig.load()
    keymap = check_keymap(settings.keymap, str(settings.path), keymap_scopes()) if settings.keymap else {}
    return AmptuiApp(runs_dir, watch=Path(watch) if watch else None, clock=clock, process_alive=process_alive,
                     keymap=keymap)


def headless_svg(make_screen: Callable[[], Screen], runs_root: Path, size: tuple[int, int],
                 timeout_s: float = 30.0) -> str:
    """Draw one screen headless at `size` and return it as SVG, once the screen says it has drawn
    what it read (`drawn()`), or after `timeout_s` with what it has."""
    class PictureApp(AmptuiApp):
        def first_screen(self) -> Screen:
            return make_screen()  # this screen only, not the home screen AmptuiApp would open

    async def shoot() -> str:
        app = PictureApp(runs_root)
        async with app.run_test(size=size) as pilot:
            deadline = time.monotonic() + timeout_s
            await pilot.pause(0.1)
            while time.monotonic() < deadline:
                drawn = getattr(app.screen, "drawn", None)
                if drawn is not None and drawn():
                    break
                await pilot.pause(0.1)
            await pilot.pause(SETTLE_S)
            return screen_svg(app)

    return asyncio.run(shoot())
