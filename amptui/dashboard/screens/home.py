"""Home: presets, their toggles, the run history; r run, s save as, w watch, c compare, q quit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, OptionList, Static
from textual.widgets.option_list import Option

from ...core import config as cfgmod
from ...core.ab import PRECISION_KEYS
from ...core import presets as presetmod
from ...core.errors import ConfigError, UserError
from ...core.runs import RunInfo, load_run
from ..widgets.runtable import RunTable
from ..widgets.toggles import TogglesPanel

RUNS_REFRESH_S = 2.0


def toml_value(value: Any) -> str:
    """A value as `--set` expects it (a TOML value)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def amptui_command(sub: str, preset: presetmod.Preset, overrides: dict[str, Any], *extra: str) -> list[str]:
    """`amptui SUB PRESET --set ... EXTRA` as a child process runs it (torch is imported only there)."""
    ref = preset.name if preset.builtin else str(preset.path)
    command = [sys.executable, "-m", "amptui", sub, ref, *extra]
    for key, value in overrides.items():
        command += ["--set", f"{key}={toml_value(value)}"]
    return command


class RunsCache:
    """`core.runs.list_runs` for a refresh every few seconds: a finished run whose files have not
    changed is not read again, so hundreds of big runs cost a few stat calls."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple, RunInfo]] = {}

    @staticmethod
    def _stamp(path: Path) -> tuple:
        stamp = []
        for name in ("events.jsonl", "run.json", "config.toml"):
            try:
                st = (path / name).stat()
                stamp.append((st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                stamp.append(None)
        return tuple(stamp)

    def scan(self, root: Path) -> list[RunInfo]:
        if not root.is_dir():
            return []
        found: dict[str, tuple[tuple, RunInfo]] = {}
        for path in root.iterdir():
            if not (path / "config.toml").is_file():
                continue
            stamp = self._stamp(path)
            known = self._known.get(path.name)
            if known and known[0] == stamp and known[1].status in ("completed", "failed", "stopped"):
                found[path.name] = known
            else:
                found[path.name] = (stamp, load_run(path))
        self._known = found
        runs = [info for _, info in found.values()]
        runs.sort(key=lambda r: (r.started or 0, r.run_id), reverse=True)
        return runs


class HomeScreen(Screen):
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("a", "ab", "A/B"),
        Binding("s", "save_as", "Save as"),
        Binding("w", "watch", "Watch"),
        Binding("c", "compare", "Compare"),
        Binding("q", "quit", "Quit"),
        Binding("escape", "focus_presets", "Presets", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="home")
        self.presets: list[presetmod.Preset] = []
        self.preset: presetmod.Preset | None = None
        self._launching = False
        self._runs_cache = RunsCache()

    def compose(self) -> ComposeResult:
        yield Static(id="home-title")
        with Horizontal(id="home-top"):
            with Vertical(id="presets-box"):
                yield OptionList(id="presets")
            with Vertical(id="toggles-box"):
                yield Static(id="preset-desc")
                yield TogglesPanel(id="toggles")
        with Vertical(id="runs-box"):
            yield RunTable(id="runs")
            yield Static("no runs yet: pick a preset and press r", id="runs-empty")
            yield Static(id="run-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#presets-box").border_title = "Presets"
        self.query_one("#toggles-box").border_title = "Toggles"
        self.query_one("#runs-box").border_title = "Runs"
        self.query_one("#home-title", Static).update(
            Text.assemble(("amptui", "bold"), " · mixed-precision training dashboard · runs in ",
                          (self.app.runs_display, "italic")))
        self.load_presets()
        self.refresh_runs()
        self.set_interval(RUNS_REFRESH_S, self.refresh_runs)
        self.query_one("#presets", OptionList).focus()

    # --- presets ---------------------------------------------------------------------------------
    def load_presets(self, select: str | None = None) -> None:
        option_list = self.query_one("#presets", OptionList)
        current = select or (self.preset.name if self.preset else None)
        self.presets = presetmod.list_presets()
        option_list.clear_options()
        width = max((len(p.name) for p in self.presets), default=10)
        for p in self.presets:
            tag = ("built-in", "dim") if p.builtin else ("saved", "green")
            option_list.add_option(Option(Text.assemble(p.name.ljust(width + 1), tag), id=p.name))
        names = [p.name for p in self.presets]
        index = names.index(current) if current in names else 0
        if self.presets:
            option_list.highlighted = index
            self.show_preset(self.presets[index])

    @on(OptionList.OptionHighlighted, "#presets")
    def _preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        preset = next((p for p in self.presets if p.name == event.option.id), None)
        if preset is not None and preset != self.preset:
            self.show_preset(preset)

    @on(OptionList.OptionSelected, "#presets")
    def _preset_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#t-amp-autocast").focus()

    def show_preset(self, preset: presetmod.Preset) -> None:
        self.preset = preset
        desc = self.query_one("#preset-desc", Static)
        toggles = self.query_one(TogglesPanel)
        try:
            values = preset.config().to_dict()
        except UserError as exc:
            desc.update(Text(f"{preset.name}: cannot load: {exc}", style="red"))
            toggles.load(cfgmod.defaults())
            return
        kind = "built-in" if preset.builtin else f"saved · {preset.path}"
        desc.update(Text.assemble((preset.name, "bold"), f" ({kind}) ", (preset.description, "italic")))
        toggles.load(values)

    def action_focus_presets(self) -> None:
        self.query_one("#presets", OptionList).focus()

    # --- runs ---------------------------------------------------------------------------------------
    def refresh_runs(self) -> None:
        self._load_runs()

    @work(thread=True, exclusive=True, group="home-runs")
    def _load_runs(self) -> None:
        try:
            runs = self._runs_cache.scan(self.app.runs_root)
        except OSError:
            return
        self.app.from_thread(self._show_runs, runs)

    def _show_runs(self, runs) -> None:
        table = self.query_one(RunTable)
        table.set_runs(runs)
        self.query_one("#runs-empty").display = not runs
        table.display = bool(runs)
        self._show_detail()

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(RunTable)
        detail = self.query_one("#run-detail", Static)
        info = table.runs.get(table.highlighted_run() or "")
        if info is None:
            detail.update("")
            return
        if info.error:
            detail.update(Text.assemble((f"{info.run_id}: ", "bold"), (info.error, "red")))
        else:
            word = "loss" if info.status == "running" else "final loss"
            extra = f" · {word} {info.final_loss:.4f}" if info.final_loss is not None else ""
            if info.val_acc is not None:
                extra += f" · val acc {100 * info.val_acc:.2f}%"
            detail.update(Text.assemble((info.run_id, "bold"), f" · {info.precision_words or info.precision}"
                                        f"{extra} · w watch · space mark for compare", style="dim"))

    @on(DataTable.RowSelected, "#runs")
    def _run_selected(self, event: DataTable.RowSelected) -> None:
        self.action_watch()

    # --- actions ----------------------------------------------------------------------------------
    def _current_values(self) -> dict[str, dict[str, Any]] | None:
        toggles = self.query_one(TogglesPanel)
        try:
            return toggles.values()
        except ConfigError as exc:
            toggles.refresh_summary()
            self.notify(str(exc), title="Fix the toggles first", severity="error")
            return None

    def action_run(self) -> None:
        if self.preset is None:
            return
        if self._launching:
            self.notify("a run is already starting…")
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        self._launching = True
        self.notify(f"starting {self.preset.name}…", timeout=3)
        self._launch(self.preset, overrides)

    def _changed_toggles(self) -> dict[str, Any] | None:
        """The toggles that differ from the preset (None, with a notice, when one is invalid)."""
        if self._current_values() is None:
            return None
        toggles = self.query_one(TogglesPanel)
        overrides = {}
        for key, value in toggles.overrides().items():
            section, name = key.split(".")
            if toggles.base[section][name] != value:
                overrides[key] = value
        return overrides

    def action_ab(self) -> None:
        """`amptui ab` on the highlighted preset and toggles: one run per precision variant (the
        device's default variants), one after another, in the background; they appear in Runs."""
        if self.preset is None:
            return
        overrides = self._changed_toggles()
        if overrides is None:
            return
        overrides = {k: v for k, v in overrides.items() if k not in PRECISION_KEYS}
        root = Path(self.app.runs_root)
        log = root / f"ab-{time.strftime('%Y%m%d-%H%M%S')}-{self.preset.name}.log"
        command = amptui_command("ab", self.preset, overrides, "--runs-dir", str(root))
        try:
            root.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as out:
                subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)  # like a run: quitting the dashboard does not stop it
        except OSError as exc:
            self.notify(f"could not start the A/B: {exc}", severity="error", timeout=10)
            return
        self.notify(f"A/B of {self.preset.name} started: its precision variants run one after another and "
                    f"appear in Runs; mark them with space and press c. Table and progress: {log}", timeout=10)
        self.set_timer(2.0, self.refresh_runs)

    @work(thread=True, exclusive=True, group="home-launch")
    def _launch(self, preset: presetmod.Preset, overrides: dict[str, Any]) -> None:
        """`amptui run PRESET --set ... --detach`: the same detached trainer the CLI starts; torch is
        imported only in that child, never in the dashboard."""
        command = amptui_command("run", preset, overrides, "--detach", "--runs-dir", str(self.app.runs_root))
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=180,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            self.app.from_thread(self._launched, None, f"could not start amptui: {exc}")
            return
        if proc.returncode == 0:
            lines = [l for l in proc.stdout.strip().splitlines() if l.strip()]
            self.app.from_thread(self._launched, lines[-1].strip() if lines else None, None)
        else:
            lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
            message = lines[-1] if lines else f"amptui run exited with {proc.returncode}"
            message = message.removeprefix("amptui: error: ")
            self.app.from_thread(self._launched, None, message)

    def _launched(self, run_id: str | None, error: str | None) -> None:
        self._launching = False
        if error or not run_id:
            self.notify(error or "the run did not start", title="Run refused", severity="error", timeout=10)
            self.query_one(TogglesPanel).show_refusal(f"run refused: {error or 'the run did not start'}")
            return
        self.refresh_runs()
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_save_as(self) -> None:
        if self.preset is None:
            return
        values = self._current_values()
        if values is None:
            return
        from .modals import SaveAsModal

        source = self.preset

        def saved(name: str | None) -> None:
            if name:
                self.notify(f"saved preset {name!r} to {presetmod.saved_dir() / (name + '.toml')}")
                self.load_presets(select=name)

        self.app.push_screen(SaveAsModal(source.name, values), saved)

    def action_watch(self) -> None:
        table = self.query_one(RunTable)
        run_id = table.highlighted_run()
        if run_id is None:
            self.notify("no run to watch yet: press r to start one", severity="warning")
            return
        self.app.open_run(Path(self.app.runs_root) / run_id)

    def action_compare(self) -> None:
        table = self.query_one(RunTable)
        marked = list(table.marked)
        if len(marked) < 2:
            self.notify("mark two or more runs with space (in the Runs table), then press c; the first "
                        "marked is the baseline", severity="warning", timeout=6)
            self.query_one(RunTable).focus()
            return
        self.app.open_compare([Path(self.app.runs_root) / rid for rid in marked])

    def action_quit(self) -> None:
        self.app.exit()
