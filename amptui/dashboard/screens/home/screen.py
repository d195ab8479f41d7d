"""Home: presets, their toggles, the run history (keys: see BINDINGS, or press ? / F1).

The screen composes two panes that post what it reacts to: the presets with their toggles
(presets.PresetsPane) and the runs (runs.RunsPane: the filter changed, the keys that apply changed).
Its keys r, a, t, e, R start `amptui ... --detach` through plain functions (launch.py) that say what
to start or why not; a start runs in a thread worker whose result the screen shows when the worker
is done (`_worker_done`). x, i, o act on the highlighted run and the runs folder."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import OptionList
from textual.worker import Worker, WorkerState

from amptui.core.config import presets as presetmod
from amptui.core.planning.plan import latest_plan
from amptui.core.run import trust
from amptui.core.run.runs import RunInfo
from amptui.dashboard.filestamps import presets_stamp
from amptui.dashboard.notice import Notice
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.screens.folders import folder_choices
from amptui.dashboard.screens.home import launch
from amptui.dashboard.screens.home import runs as runsmod
from amptui.dashboard.screens.home.presets import PresetsPane
from amptui.dashboard.screens.home.runs import RunsPane
from amptui.dashboard.screens.keys import with_reasons
from amptui.dashboard.screens.plan.screen import show_plan
from amptui.dashboard.widgets.keysfooter import KeysFooter
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.title import HomeTitle
from amptui.dashboard.widgets.toggles import TogglesPanel

LAUNCH_GROUP = "home-launch"  # runs, scripts and resumes: one start at a time


class HomeScreen(DashboardScreen):
    # One line per key; the footer, the help screen (? / F1) and check_action all read this list.
    BINDINGS = with_reasons([
        Binding("r", "run", "Run"),
        Binding("a", "ab", "A/B"),
        Binding("t", "tune", "Tune"),
        # s, w (enter), x: in help (? / F1) and the palette; the footer must fit 80 columns
        Binding("s", "save_as", "Save", show=False),
        Binding("w", "watch", "Watch", show=False),
        Binding("R", "resume", "Resume"),
        Binding("x", "delete", "Delete", show=False),
        Binding("i", "info", "Info", show=False),  # in help (? / F1): the footer must fit 80 columns
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("f", "filter", "Filter", show=False),
        Binding("o", "runs_folders", "Runs folders", show=False),  # in help (? / F1); the footer fits 80 columns
        Binding("e", "script", "Script", show=False),  # run a script of your own, by path, with arguments
        Binding("c", "compare", "Compare"),
        Binding("P", "plan", "Plan", show=False),  # the highlighted preset's newest `amptui plan`
        Binding("S", "cancel_ab", "Cancel A/B", show=False),  # the whole A/B of the highlighted run
        Binding("q", "quit", "Quit"),
        Binding("escape", "focus_presets", "Presets", show=False),
        Binding("1", "pane('presets')", "Presets pane", show=False),
        Binding("2", "pane('toggles')", "Toggles pane", show=False),
        Binding("3", "pane('runs')", "Runs pane", show=False),
    ], ("watch", "resume", "delete", "info"), "home")
    KEY_HELP = {"space": "mark/unmark the highlighted run for compare (in Runs); the first marked is the baseline",
                "tab / shift+tab": "move between presets, toggles and runs (or 1, 2, 3 straight there)",
                "home / end": "the first / last run (in Runs)",
                "enter": "on a preset: edit its toggles; on a run: watch it; on a drop-down: open it",
                "escape": "leave a text field / the filter (back to Presets)"}

    def __init__(self) -> None:
        super().__init__(id="home")
        self._launching = False  # a run, script or resume is starting (until its worker is done)
        self._watched_abs: set[str] = set()  # A/Bs started here (group ids): compare opens when they end

    @property
    def _presets(self) -> PresetsPane:
        return self.query_one(PresetsPane)

    @property
    def _runs(self) -> RunsPane:
        return self.query_one(RunsPane)

    @property
    def presets(self) -> list[presetmod.Preset]:
        """The presets as last listed."""
        return self._presets.presets

    @property
    def preset(self) -> presetmod.Preset | None:
        """The highlighted preset (None: none shown)."""
        return self._presets.preset

    def compose(self) -> ComposeResult:
        yield HomeTitle(id="home-title")
        yield PresetsPane(id="home-top")
        yield RunsPane(id="runs-box")
        yield KeysFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._show_title()
        self.load_presets()
        self.query_one("#presets", OptionList).focus()

    def _show_title(self) -> None:
        others = len(folder_choices(self.app.runs_root)) - 1  # runs folders used elsewhere: `o` lists them
        self.query_one("#home-title", HomeTitle).show(self.app.runs_display, others)  # fitted to its width

    def load_presets(self, select: str | None = None) -> None:
        """List the presets again (and highlight `select`, or the one highlighted)."""
        self._presets.load(select)

    # --- runs: read and shown by RunsPane ----------------------------------------------------------
    def refresh_runs(self) -> None:
        """Read the run list again (back from a run screen, a run started)."""
        self._runs.refresh_runs()

    @on(RunsPane.Listed)
    def _listed(self, event: RunsPane.Listed) -> None:
        """A/Bs started here that have ended open the compare screen; presets saved elsewhere show."""
        for ended in launch.ended_abs(self._watched_abs, event.groups, event.runs, self.app.runs_root):
            self._watched_abs.discard(ended.group_id)
            self.say(ended.notice)
            if ended.compare:
                self.app.open_compare(ended.compare)
        self._presets.changed_on_disk(presets_stamp())

    @on(RunsPane.KeysChanged)
    def _keys_changed(self) -> None:
        self.refresh_bindings()

    @on(RunsPane.FilterChanged)
    def _filter_changed(self, event: RunsPane.FilterChanged) -> None:
        self._presets.refilter(event.words)

    @on(RunTable.RowSelected, "#runs")
    def _run_selected(self) -> None:
        self.action_watch()

    def show_runs_folder(self) -> None:
        """The app's runs folder changed (`o`): its runs, from scratch."""
        self._runs.table.marked.clear()
        self._show_title()
        self._runs.refresh_runs(anew=True)

    # --- launches: plain functions say what to start; a worker starts it; _worker_done shows it -----
    def refusal(self, action: str) -> str | None:
        if action in ("watch", "delete", "info") and self._runs.highlighted() is None:
            return "no run highlighted: runs are listed under Runs (tab there)"
        if action == "resume":
            return self._runs.resume_refusal
        return None

    def _begin(self, start: launch.Start) -> None:
        """Start it in a thread worker (runs and resumes one at a time; a second A/B or tune of the
        same preset is refused by `amptui` itself)."""
        one = start.verb in launch.ONE_AT_A_TIME
        self._launching = self._launching or one
        self.say(start.said)
        self.run_worker(partial(launch.start, start), thread=True, exclusive=start.verb != "ab", exit_on_error=False,
                        group=LAUNCH_GROUP if one else f"home-{start.verb}", name=f"starting the {start.verb}")

    @on(Worker.StateChanged)
    def _worker_done(self, event: Worker.StateChanged) -> None:
        result = event.worker.result if event.state == WorkerState.SUCCESS else None
        if isinstance(result, launch.Started):
            self._started(result)
        elif isinstance(result, launch.AbEstimate):
            self._ab_estimated(result)

    def _started(self, started: launch.Started) -> None:
        verb, reply = started.start.verb, started.reply or {}
        self.say(*started.notices())
        if verb in launch.ONE_AT_A_TIME:
            self._launching = False
        if started.failed:
            if verb == "run":
                self.query_one(TogglesPanel).show_refusal(f"run refused: {started.error}")
        elif verb == "ab":
            self._watched_abs.add(reply["group_id"])
            self.set_timer(2.0, self.refresh_runs)
        elif verb == "tune":
            from amptui.dashboard.screens.tune.screen import TuneScreen

            self.app.push_screen(TuneScreen(Path(reply["result"]), Path(reply["log"]), started.start.name,
                                            announce=True))
        else:
            self.refresh_runs()
            self.app.open_run(Path(self.app.runs_root) / reply["run_id"])

    def worker_failed(self, worker: Worker) -> None:
        if worker.group == LAUNCH_GROUP:
            self._launching = False  # its reply never comes: r and R work again

    def _launch_preset(self, refused: str) -> tuple[presetmod.Preset, dict[str, Any]] | None:
        """The preset to launch and its changed toggles, or None with a notice titled `refused` saying
        why nothing can be launched now (before any process starts)."""
        preset = self.preset
        problem = launch.launch_refusal(preset, self._runs.table.filter_words, self.app.runs_root)
        if problem or preset is None:
            self.notify(problem or "no preset highlighted", title=refused, severity="error", timeout=10)
            return None
        if refused == "Run refused" and self._launching:
            self.notify("a run is already starting…")
            return None
        overrides = self._presets.changed_toggles()
        if isinstance(overrides, Notice):
            self.say(overrides)
            return None
        return preset, overrides

    def action_run(self) -> None:
        chosen = self._launch_preset("Run refused")
        if chosen is not None:
            self._begin(launch.run_start(*chosen, self.app.runs_root))

    def _script_run(self) -> RunInfo | None:
        """The script run highlighted in Runs, when the table has the focus (a and t on it: its A/B, its tune)."""
        info = self._runs.highlighted() if isinstance(self.focused, RunTable) else None
        return info if launch.is_script_run(info) else None

    def action_ab(self) -> None:
        """An A/B of the highlighted preset and toggles: one run per precision variant (the device's
        default variants), one after another, in the background, as one group in Runs; the compare
        screen opens on them when the last one ends. First how long it would take (`_ab_estimated`):
        a long one is confirmed in a dialog that offers fewer steps."""
        script = self._script_run()
        if script is not None:
            start = launch.script_ab_start(script, self.app.runs_root)
            self._begin(start) if isinstance(start, launch.Start) else self.say(start)
            return
        chosen = self._launch_preset("A/B refused")
        if chosen is None:
            return
        preset, overrides = chosen[0], launch.ab_overrides(chosen[1])
        self.notify(f"A/B of {preset.name}: timing one step of each variant to say how long it takes…", timeout=6)
        self.run_worker(partial(launch.estimate_ab, preset, overrides, self.app.runs_root), thread=True,
                        group="home-ab-estimate", exclusive=False, exit_on_error=False, name="estimating the A/B")

    def _ab_estimated(self, estimate: launch.AbEstimate) -> None:
        refusal = estimate.refusal()
        if refusal is not None:
            self.say(refusal)
        elif not estimate.long:
            self._begin(estimate.start())
        else:
            from amptui.dashboard.screens.ab.start import AbStartModal

            self.ask(AbStartModal(estimate.preset.name, estimate.found), 
                     lambda answer: self._begin(estimate.start(shorter=answer == "shorter")))

    def action_tune(self) -> None:
        """A tune of the highlighted preset and toggles (or of the script run highlighted in Runs);
        first its budget (TuneStartModal), then its screen opens once started."""
        script = self._script_run()
        if script is not None:
            ask: launch.TuneAsk | Notice = launch.script_tune_ask(script, self.app.runs_root)
        else:
            chosen = self._launch_preset("Tune refused")
            if chosen is None:
                return
            ask = launch.tune_ask(*chosen, self.app.runs_root)
        if isinstance(ask, Notice):
            self.say(ask)
            return
        from amptui.dashboard.screens.tune.start import TuneStartModal

        tune = ask
        self.ask(TuneStartModal(tune.name, tune.kept, tune.hint), lambda minutes: self._begin(tune.start(minutes)))

    def action_script(self) -> None:
        """Run a script by path with its arguments (`amptui run --script PATH --detach -- ARGS`)."""
        from amptui.core.run import runops
        from amptui.dashboard.screens.script_modal import ScriptModal

        problem = runops.runs_folder_problem(self.app.runs_root)
        if problem:
            self.notify(problem, title="Script refused", severity="error", timeout=10)
            return

        def chosen(words: list[str]) -> None:
            if words and not self._launching:
                self._begin(launch.script_start(words, self.app.runs_root))

        self.ask(ScriptModal(), chosen)

    def action_resume(self) -> None:
        info = self._runs.highlighted()
        if info is None or self._launching:
            return
        foreign = trust.foreign_code(info.path)
        if not foreign:
            self._begin(launch.resume_start(info.run_id, [], self.app.runs_root))
            return
        from amptui.dashboard.screens.modals import ConfirmModal

        self.ask(ConfirmModal(trust.question(info.run_id, foreign), yes="Resume", no="Cancel"),
                 lambda _: self._begin(launch.resume_start(info.run_id, [trust.TRUST_FLAG], self.app.runs_root)))

    # --- the highlighted run, the preset, the panes -------------------------------------------------
    def action_watch(self) -> None:
        run_id = self._runs.table.highlighted_run()
        if run_id is None:
            self.notify("no run to watch yet: press r to start one", severity="warning")
            return
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_delete(self) -> None:
        info = self._runs.highlighted()
        question = runsmod.delete_question(info) if info is not None else None
        if isinstance(question, Notice):
            self.say(question)
        elif info is not None and question is not None:
            from amptui.dashboard.screens.modals import ConfirmModal

            def delete(_: bool) -> None:
                self.say(runsmod.delete(info, self.app.process_alive))
                self.refresh_runs()

            self.ask(ConfirmModal(question, yes="Delete", no="Keep"), delete)

    def action_info(self) -> None:
        info = self._runs.highlighted()
        if info is not None:
            from amptui.dashboard.screens.modals import RunInfoModal

            self.app.push_screen(RunInfoModal(info.path, self.app.runs_display))

    def action_runs_folders(self) -> None:
        """The runs folders this user has used; the one chosen replaces the home screen's."""
        from amptui.dashboard.screens.folders import RunsFolderChooser

        self.ask(RunsFolderChooser(self.app.runs_root), self.app.switch_runs_folder)

    def action_cancel_ab(self) -> None:
        from amptui.dashboard.screens.ab.cancel import cancel_ab_of

        self.say(cancel_ab_of(self.app.runs_root, self._runs.table.highlighted_run()))

    def action_compare(self) -> None:
        table = self._runs.table
        if len(table.marked) < 2:
            self.notify("mark two or more runs with space (in the Runs table), then press c; the first "
                        "marked is the baseline", severity="warning", timeout=6)
            table.focus()
            return
        self.app.open_compare([Path(self.app.runs_root) / rid for rid in table.marked])

    def action_save_as(self) -> None:
        """s: the highlighted preset with its toggles as a new saved preset (a dialog asks its name)."""
        source, cfg = self.preset, self._presets.values()
        if isinstance(cfg, Notice) or source is None:
            self.say(cfg if isinstance(cfg, Notice) and source is not None else None)
            return
        from amptui.dashboard.screens.modals import SaveAsModal

        def saved(name: str) -> None:
            self.notify(f"saved preset {name!r} to {presetmod.saved_dir() / (name + '.toml')}")
            self.load_presets(select=name)

        self.ask(SaveAsModal(source.name, cfg), saved)

    def action_plan(self) -> None:
        if self.preset is None:
            self.notify("no preset highlighted", severity="warning")
            return
        show_plan(self, self.preset.name, latest_plan(Path(self.app.runs_root), self.preset.name))

    def action_pane(self, pane: str) -> None:
        """1, 2, 3: straight to Presets, Toggles or Runs (instead of a dozen Tabs)."""
        if pane == "toggles" and not self.query_one(TogglesPanel).invalid_preset:
            self.query_one("#t-amp-autocast").focus()
        elif pane == "runs":
            table = self._runs.table
            (table if table.display else self.query_one("#presets", OptionList)).focus()
        else:
            self.action_focus_presets()

    def action_focus_presets(self) -> None:
        self.query_one("#presets", OptionList).focus()

    def action_filter(self) -> None:
        self._runs.open_filter()

    def action_quit(self) -> None:
        self.app.exit()
