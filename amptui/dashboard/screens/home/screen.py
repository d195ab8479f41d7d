"""Home: presets, their toggles, the run history (keys: see BINDINGS, or press ? / F1).

The screen lists the runs and owns three parts it hands its keys to: the presets and their toggle
edits (presets.HomePresets), the launches r, a, t, e (launch.HomeLaunches) and the actions
on the highlighted run R, x, i, o (runs.HomeRunActions)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, OptionList, Static
from textual.worker import Worker

from amptui.core.config import presets as presetmod
from amptui.core.config.precision import precision_or_unseen
from amptui.core.distribution import dist_label
from amptui.core.fmt import fmt_accuracy as fmt_acc
from amptui.core.fmt import fmt_duration, fmt_loss, shown
from amptui.core.plan import latest_plan
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard.filestamps import presets_stamp
from amptui.dashboard.runscache import RunsCache
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.home.launch import HomeLaunches
from amptui.dashboard.screens.home.presets import HomePresets, PresetList
from amptui.dashboard.screens.home.runs import HomeRunActions
from amptui.dashboard.screens.keys import with_reasons
from amptui.dashboard.screens.plan.screen import show_plan
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.title import HomeTitle
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.dashboard.widgets.wordline import WordLine
from amptui.jobs import groups as groupmod
from amptui.jobs.groups import Group

RUNS_REFRESH_S = 2.0
RUNS_GROUP = "home-runs"  # the worker that reads the run list


class FilterInput(Input):
    BINDINGS = [Binding("escape", "done", "Done")]

    def action_done(self) -> None:
        if isinstance(self.screen, HomeScreen):
            self.screen.close_filter()


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
        self._resume_refusal: str | None = "no run highlighted"  # why R does not apply now
        self._keys_shown: tuple | None = None  # what the footer's keys were last drawn for
        self._runs_cache = RunsCache()
        self.preset_picker = HomePresets(self)
        self.launches = HomeLaunches(self, self.preset_picker, self.refresh_runs)
        self.run_actions = HomeRunActions(self, self.launches, self._highlighted_info, self.refresh_runs)

    @property
    def presets(self) -> list[presetmod.Preset]:
        """The presets as last listed."""
        return self.preset_picker.presets

    @property
    def preset(self) -> presetmod.Preset | None:
        """The highlighted preset (None: none shown)."""
        return self.preset_picker.preset

    def compose(self) -> ComposeResult:
        yield HomeTitle(id="home-title")
        with Horizontal(id="home-top"):
            with Vertical(id="presets-box"):
                yield PresetList(id="presets")
            with Vertical(id="toggles-box"):
                yield WordLine(id="preset-desc")
                yield TogglesPanel(id="toggles")
        with Vertical(id="runs-box"):
            yield FilterInput(placeholder="filter presets and runs: words in name, status, precision, A/B group, id",
                              id="runs-filter", compact=True)
            yield RunTable(id="runs")
            yield Static("no runs yet: pick a preset and press r", id="runs-empty")
            yield WordLine(id="run-detail")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#presets-box").border_title = "Presets"
        self.query_one("#toggles-box").border_title = "Toggles"
        self.query_one("#runs-box").border_title = "Runs"
        self.query_one("#runs-filter").display = False
        self.run_actions.show_title()
        self.load_presets()
        self.refresh_runs()
        self.set_interval(RUNS_REFRESH_S, self.refresh_runs)
        self.query_one("#presets", OptionList).focus()

    # --- presets (in HomePresets) ------------------------------------------------------------------
    def load_presets(self, select: str | None = None) -> None:
        """List the presets again (and highlight `select`, or the one highlighted)."""
        self.preset_picker.load(select)

    @on(OptionList.OptionHighlighted, "#presets")
    def _preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.preset_picker.highlighted(event.option.id)

    @on(OptionList.OptionSelected, "#presets")
    def _preset_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#t-amp-autocast").focus()

    @on(TogglesPanel.Edited)
    def _toggles_edited(self) -> None:
        self.preset_picker.keep_edits()

    # --- runs ---------------------------------------------------------------------------------------
    def refresh_runs(self) -> None:
        """Read the run list again, unless a read is still going (a slow one would be cancelled before
        it showed anything; its result still carries the current filter, which applies when shown)."""
        if not any(w.group == RUNS_GROUP and w.is_running for w in self.workers):
            self._load_runs()

    @in_background(RUNS_GROUP, "reading the run list")
    def _load_runs(self) -> None:
        try:
            runs = self._runs_cache.scan(self.app.runs_root)
            groups = groupmod.groups(self.app.runs_root) if self.app.runs_root.is_dir() else []
        except OSError:
            return
        self.app.from_thread(self._show_runs, runs, groups)
        self.app.from_thread(self.preset_picker.changed_on_disk, presets_stamp())

    def _show_runs(self, runs: list[RunInfo], groups: list[Group]) -> None:
        table = self.query_one(RunTable)
        table.set_runs(runs, {rid: g.label for g in groups for rid in g.runs})
        self.query_one("#runs-empty").display = not runs
        table.display = bool(runs)
        words = " ".join(table.filter_words)
        self.query_one("#runs-box").border_title = (f"Runs · filter {words!r}: {len(table.runs)} of {table.total}"
                                                    if words else "Runs")
        self._show_detail()
        self.launches.groups_ended(groups, {r.run_id: r for r in runs})

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _highlighted_info(self) -> RunInfo | None:
        table = self.query_one(RunTable)
        return table.runs.get(table.highlighted_run() or "")

    def _show_detail(self) -> None:
        detail = self.query_one("#run-detail", WordLine)
        info = self._highlighted_info()
        self._resume_refusal = runops.resume_refusal(info.path, info) if info is not None else "no run highlighted"
        keys = (info is None, self._resume_refusal)
        if keys != self._keys_shown:  # the footer is rebuilt on each refresh (every 2 s): only on a change
            self._keys_shown = keys
            self.refresh_bindings()
        if info is None:
            detail.update("")
            return
        if info.error:
            detail.update(Text.assemble((f"{info.run_id}: ", "bold"), (shown(info.error), "red")))
        else:
            word = "loss" if info.status == "running" else "final loss"
            extra = f" · {word} {fmt_loss(info.final_loss)}" if info.final_loss is not None else ""
            if info.val_acc is not None:
                extra += f" · val acc {fmt_acc(info.val_acc)}"
            spread = dist_label(info.dist)  # "DDP x2": how it ran; an FSDP policy's words already say FSDP
            if spread and (info.precision_words or "").startswith("FSDP"):
                spread = f"{info.world_size} ranks"
            how = (f"{shown(precision_or_unseen(info.precision_words or info.precision))}"
                   + (f" · {spread}" if spread else "") + f" · {fmt_duration(info.duration_s)}")
            # narrower: the run id left out (the list shows it), then the figures before the precision
            figures_first = [Text(f"{extra.removeprefix(' · ')} · {how}", style="dim")] if extra else []
            detail.show_forms(Text.assemble((info.run_id, "bold"), f" · {how}{extra}", style="dim"),
                              Text(f"{how}{extra}", style="dim"), *figures_first)

    @on(DataTable.RowSelected, "#runs")
    def _run_selected(self, event: DataTable.RowSelected) -> None:
        self.action_watch()

    def show_runs_folder(self) -> None:
        """The app's runs folder changed (`o`): its runs, from scratch."""
        self._runs_cache = RunsCache()
        self.query_one(RunTable).marked.clear()
        self.run_actions.show_title()
        self.refresh_runs()

    # --- actions: the parts' keys handed to them ---------------------------------------------------
    def refusal(self, action: str) -> str | None:
        if action in ("watch", "delete", "info") and self._highlighted_info() is None:
            return "no run highlighted: runs are listed under Runs (tab there)"
        if action == "resume":
            return self._resume_refusal
        return None

    def action_save_as(self) -> None:
        self.preset_picker.save_as()

    def action_run(self) -> None:
        self.launches.run()

    def action_ab(self) -> None:
        self.launches.ab()

    def action_tune(self) -> None:
        self.launches.tune()

    def action_script(self) -> None:
        self.launches.script()

    def action_resume(self) -> None:
        self.run_actions.resume()

    def action_delete(self) -> None:
        self.run_actions.delete()

    def action_info(self) -> None:
        self.run_actions.info()

    def action_runs_folders(self) -> None:
        self.run_actions.runs_folders()

    def worker_failed(self, worker: Worker) -> None:
        self.launches.worker_failed(worker)

    def action_watch(self) -> None:
        table = self.query_one(RunTable)
        run_id = table.highlighted_run()
        if run_id is None:
            self.notify("no run to watch yet: press r to start one", severity="warning")
            return
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_cancel_ab(self) -> None:
        from amptui.dashboard.screens.ab.cancel import cancel_ab_of

        cancel_ab_of(self, self.query_one(RunTable).highlighted_run())

    def action_plan(self) -> None:
        preset = self.preset_picker.preset
        if preset is None:
            self.notify("no preset highlighted", severity="warning")
            return
        show_plan(self, preset.name, latest_plan(Path(self.app.runs_root), preset.name))

    def action_compare(self) -> None:
        table = self.query_one(RunTable)
        marked = list(table.marked)
        if len(marked) < 2:
            self.notify("mark two or more runs with space (in the Runs table), then press c; the first "
                        "marked is the baseline", severity="warning", timeout=6)
            self.query_one(RunTable).focus()
            return
        self.app.open_compare([Path(self.app.runs_root) / rid for rid in marked])

    def action_pane(self, pane: str) -> None:
        """1, 2, 3: straight to Presets, Toggles or Runs (instead of a dozen Tabs)."""
        if pane == "toggles" and not self.query_one(TogglesPanel).invalid_preset:
            self.query_one("#t-amp-autocast").focus()
        elif pane == "runs":
            table = self.query_one(RunTable)
            (table if table.display else self.query_one("#presets", OptionList)).focus()
        else:
            self.action_focus_presets()

    def action_focus_presets(self) -> None:
        self.query_one("#presets", OptionList).focus()

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", FilterInput)
        box.display = True
        box.focus()

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(RunTable).filter_words = event.value.lower().split()
        self._runs_cache = RunsCache()
        self.refresh_runs()
        self.load_presets()

    @on(Input.Submitted, "#runs-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.close_filter()

    def close_filter(self) -> None:
        """Leave the filter field; an empty filter hides it, a set one stays shown."""
        box = self.query_one("#runs-filter", FilterInput)
        box.display = bool(box.value.strip())
        self.query_one(RunTable).focus()

    def action_quit(self) -> None:
        self.app.exit()
