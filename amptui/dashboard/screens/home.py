"""Home: presets, their toggles, the run history (keys: see BINDINGS, or press ? / F1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, OptionList, Static

from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.config.precision import precision_or_unseen
from amptui.core.distribution import dist_label
from amptui.core.errors import ConfigError
from amptui.core.fmt import fmt_accuracy as fmt_acc
from amptui.core.fmt import fmt_duration, fmt_loss, shown
from amptui.core.run import runops
from amptui.core.run.runs import RunInfo
from amptui.dashboard import toggle_edits
from amptui.dashboard.filestamps import presets_stamp
from amptui.dashboard.runscache import RunsCache
from amptui.dashboard.screens.base import DashboardScreen, in_background
from amptui.dashboard.screens.home_launch import LaunchActions
from amptui.dashboard.screens.home_presets import PresetActions, PresetList
from amptui.dashboard.screens.home_runs import RunActions
from amptui.dashboard.screens.keys import with_reasons
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.title import HomeTitle
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.jobs import groups as groupmod

RUNS_REFRESH_S = 2.0
RUNS_GROUP = "home-runs"  # the worker that reads the run list


class FilterInput(Input):
    BINDINGS = [Binding("escape", "done", "Done")]

    def action_done(self) -> None:
        if isinstance(self.screen, HomeScreen):
            self.screen.close_filter()


class HomeScreen(PresetActions, LaunchActions, RunActions, DashboardScreen):
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
        self.presets: list[presetmod.Preset] = []
        self.preset: presetmod.Preset | None = None
        self._launching = False
        self._resume_refusal: str | None = "no run highlighted"  # why R does not apply now
        self._keys_shown: tuple | None = None  # what the footer's keys were last drawn for
        self._runs_cache = RunsCache()
        self._edits: dict[str, dict[str, Any]] = toggle_edits.load()  # preset -> toggles as left (kept on disk)
        self._pristine: dict[str, Any] = {}             # the current preset's toggles as loaded
        self._watched_groups: set[str] = set()          # A/Bs started here: compare opens when they end
        self._presets_stamp = presets_stamp()            # the saved presets as last listed

    def compose(self) -> ComposeResult:
        yield HomeTitle(id="home-title")
        with Horizontal(id="home-top"):
            with Vertical(id="presets-box"):
                yield PresetList(id="presets")
            with Vertical(id="toggles-box"):
                yield Static(id="preset-desc")
                yield TogglesPanel(id="toggles")
        with Vertical(id="runs-box"):
            yield FilterInput(placeholder="filter presets and runs: words in name, status, precision, A/B group, id",
                              id="runs-filter", compact=True)
            yield RunTable(id="runs")
            yield Static("no runs yet: pick a preset and press r", id="runs-empty")
            yield Static(id="run-detail")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#presets-box").border_title = "Presets"
        self.query_one("#toggles-box").border_title = "Toggles"
        self.query_one("#runs-box").border_title = "Runs"
        self.query_one("#runs-filter").display = False
        self._show_title()
        self.load_presets()
        self.refresh_runs()
        self.set_interval(RUNS_REFRESH_S, self.refresh_runs)
        self.query_one("#presets", OptionList).focus()

    # --- presets (the rest in PresetActions) ------------------------------------------------------
    @on(OptionList.OptionHighlighted, "#presets")
    def _preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        preset = next((p for p in self.presets if p.name == event.option.id), None)
        if preset is not None and preset != self.preset:
            self.show_preset(preset)

    @on(OptionList.OptionSelected, "#presets")
    def _preset_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#t-amp-autocast").focus()

    @on(TogglesPanel.Edited)
    def _toggles_edited(self) -> None:
        self._keep_edits()

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
        self.app.from_thread(self._presets_changed, presets_stamp())

    def _show_runs(self, runs, groups=()) -> None:
        table = self.query_one(RunTable)
        table.set_runs(runs, {rid: g.label for g in groups for rid in g.runs})
        self.query_one("#runs-empty").display = not runs
        table.display = bool(runs)
        words = " ".join(table.filter_words)
        self.query_one("#runs-box").border_title = (f"Runs · filter {words!r}: {len(table.runs)} of {table.total}"
                                                    if words else "Runs")
        self._show_detail()
        self._groups_ended(groups, {r.run_id: r for r in runs})

    def _groups_ended(self, groups, runs: dict[str, RunInfo]) -> None:
        """An A/B started here that has ended opens the compare screen on its runs."""
        for group in groups:
            if group.group_id not in self._watched_groups:
                continue
            ended = group.state in ("done", "failed", "stopped") and \
                all(runs.get(r) and runs[r].status != "running" for r in group.runs)
            if group.state in groupmod.ACTIVE_STATES and not group.active:  # its process is gone, unsaid how
                ended, group.state = True, "failed"
                group.error = group.error or f"the A/B's process is gone (see {group.log})"
            if not ended:
                continue
            self._watched_groups.discard(group.group_id)
            dirs = [self.app.runs_root / r for r in group.runs]
            if group.state == "failed":  # as `amptui ab` says it: what failed, by variant name
                title = f"A/B {group.label} failed" if group.runs else f"A/B {group.label} refused"
                self.notify(group.error or "the A/B did not start", title=title, severity="error", timeout=10)
            elif group.state == "stopped":
                self.notify(f"A/B {group.label} of {group.preset} stopped: {group.error or 'cancelled'}")
            else:
                self.notify(f"A/B {group.label} of {group.preset} finished: comparing its runs")
            if len(dirs) >= 2:  # the table of what did run, failed variants included (as the CLI prints it)
                self.app.open_compare(dirs)

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _highlighted_info(self) -> RunInfo | None:
        table = self.query_one(RunTable)
        return table.runs.get(table.highlighted_run() or "")

    def _show_detail(self) -> None:
        detail = self.query_one("#run-detail", Static)
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
            detail.update(Text.assemble((info.run_id, "bold"), f" · {shown(precision_or_unseen(info.precision_words or info.precision))}"
                                        + (f" · {spread}" if spread else "")
                                        + f" · {fmt_duration(info.duration_s)}{extra}", style="dim"))

    @on(DataTable.RowSelected, "#runs")
    def _run_selected(self, event: DataTable.RowSelected) -> None:
        self.action_watch()

    # --- actions ----------------------------------------------------------------------------------
    def _current_values(self) -> cfgmod.Config | None:
        toggles = self.query_one(TogglesPanel)
        try:
            return toggles.values()
        except ConfigError as exc:
            toggles.refresh_summary()
            self.notify(str(exc), title="Fix the toggles first", severity="error")
            return None

    def refusal(self, action: str) -> str | None:
        if action in ("watch", "delete", "info") and self._highlighted_info() is None:
            return "no run highlighted: runs are listed under Runs (tab there)"
        if action == "resume":
            return self._resume_refusal
        return None

    def action_save_as(self) -> None:
        if self.preset is None:
            return
        cfg = self._current_values()
        if cfg is None:
            return
        from amptui.dashboard.screens.modals import SaveAsModal

        source = self.preset

        def saved(name: str | None) -> None:
            if name:
                self.notify(f"saved preset {name!r} to {presetmod.saved_dir() / (name + '.toml')}")
                self.load_presets(select=name)

        self.app.push_screen(SaveAsModal(source.name, cfg), saved)

    def action_watch(self) -> None:
        table = self.query_one(RunTable)
        run_id = table.highlighted_run()
        if run_id is None:
            self.notify("no run to watch yet: press r to start one", severity="warning")
            return
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_cancel_ab(self) -> None:
        from amptui.dashboard.screens.ab_cancel import cancel_ab_of

        cancel_ab_of(self, self.query_one(RunTable).highlighted_run())

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
