"""Home screen presets: the list (filtered by `/` like the runs), the highlighted preset's toggles,
and what the user typed in them, kept per preset (also on disk). HomePresets is the home screen's
part that fills the list, the description and the toggles; the screen hands its preset keys to it."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.errors import ConfigError, UserError
from amptui.dashboard import toggle_edits
from amptui.dashboard.filestamps import PresetsStamp, presets_stamp
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel


class PresetList(OptionList):
    """The presets. Shift+Tab goes back to the widget before it on screen, the last toggle (Runs,
    below, is one Tab after the toggles)."""

    BINDINGS = [Binding("shift+tab", "previous_widget", "Previous", show=False)]

    def action_previous_widget(self) -> None:
        self.screen.query_one(TogglesPanel).focus_last()


def toggle_values(screen: DashboardScreen) -> cfgmod.Config | None:
    """The toggles as a config, or None with a notice saying what to fix first."""
    toggles = screen.query_one(TogglesPanel)
    try:
        return toggles.values()
    except ConfigError as exc:
        toggles.refresh_summary()
        screen.notify(str(exc), title="Fix the toggles first", severity="error")
        return None


class HomePresets:
    """The presets as last listed, the highlighted one, and the toggle edits kept per preset, shown
    in `screen`'s preset list (#presets), description (#preset-desc) and toggles."""

    def __init__(self, screen: DashboardScreen) -> None:
        self.screen = screen
        self.presets: list[presetmod.Preset] = []  # as last listed
        self.preset: presetmod.Preset | None = None  # the highlighted preset
        self._edits: dict[str, dict[str, Any]] = toggle_edits.load()  # preset -> toggles as left (kept on disk)
        self._pristine: dict[str, Any] = {}  # the current preset's toggles as loaded
        self._stamp = presets_stamp()  # the saved presets as last listed

    def load(self, select: str | None = None) -> None:
        option_list = self.screen.query_one("#presets", OptionList)
        current = select or (self.preset.name if self.preset else None)
        self.presets = presetmod.list_presets()
        option_list.clear_options()
        width = max((len(p.name) for p in self.presets), default=10)
        words = self.screen.query_one(RunTable).filter_words  # `/` filters presets and runs alike
        listed = [p for p in self.presets if all(w in f"{p.name} {p.description}".lower() for w in words)]
        for p in listed:
            tag = ("built-in", "dim") if p.builtin else ("saved", "green")
            option_list.add_option(Option(Text.assemble(p.name.ljust(width + 1), tag), id=p.name))
        names = [p.name for p in listed]
        index = names.index(current) if current in names else 0
        if listed:
            option_list.highlighted = index
            if listed[index] != self.preset:  # the same preset, unchanged: its toggles stay as they are
                self.show(listed[index])
        else:  # the filter hides every preset: no toggles of one it hides
            self.show_none(f"no preset matches the filter {' '.join(words)!r}")

    def show_none(self, why: str) -> None:
        """No preset shown: the toggles say why, and r, a and t refuse with that reason."""
        toggles = self.screen.query_one(TogglesPanel)
        if self.preset is not None and not toggles.invalid_preset:
            self.keep_edits()
        self.preset = None
        self._pristine = {}
        self.screen.query_one("#preset-desc", Static).update(Text(why, style="italic"))
        toggles.load_invalid(why)

    def changed_on_disk(self, stamp: PresetsStamp) -> None:
        """Presets saved, replaced or deleted by another process (a CLI `presets save`, a tune's
        winner) appear and go without a restart."""
        if stamp != self._stamp:
            self._stamp = stamp
            self.load()

    def highlighted(self, name: str | None) -> None:
        """The list's highlight moved to preset `name`: its toggles."""
        preset = next((p for p in self.presets if p.name == name), None)
        if preset is not None and preset != self.preset:
            self.show(preset)

    def show(self, preset: presetmod.Preset) -> None:
        toggles = self.screen.query_one(TogglesPanel)
        if self.preset is not None and not toggles.invalid_preset:  # keep what the user typed, per preset
            self.keep_edits()
        self.preset = preset
        desc = self.screen.query_one("#preset-desc", Static)
        try:
            cfg = preset.config()
        except UserError as exc:
            desc.update(Text(f"{preset.name}: cannot load: {exc}", style="red"))
            toggles.load_invalid(f"preset {preset.name} cannot load: {exc}")
            self._pristine = {}
            return
        kind = "built-in" if preset.builtin else f"saved · {preset.path}"
        toggles.load(cfg)
        self._pristine = toggles.state()
        edited = self._edits.get(preset.name)
        if edited:
            toggles.restore(edited)
        desc.update(Text.assemble((preset.name, "bold"), f" ({kind}) ",
                                  ("✎ your edits, kept " if edited else "", "bold yellow"),
                                  (preset.description, "italic")))

    def keep_edits(self) -> None:
        """What the user typed in the current preset's toggles, kept per preset (also on disk)."""
        toggles = self.screen.query_one(TogglesPanel)
        if self.preset is None or toggles.invalid_preset:
            return
        state = toggles.state()
        edited = state if state != self._pristine else None
        if edited != self._edits.get(self.preset.name):
            self._edits.pop(self.preset.name, None)
            if edited:
                self._edits[self.preset.name] = edited
            toggle_edits.remember(self.preset.name, edited)

    def save_as(self) -> None:
        """s: the highlighted preset with its toggles as a new saved preset (a dialog asks its name)."""
        if self.preset is None:
            return
        cfg = toggle_values(self.screen)
        if cfg is None:
            return
        from amptui.dashboard.screens.modals import SaveAsModal

        source = self.preset

        def saved(name: str | None) -> None:
            if name:
                self.screen.notify(f"saved preset {name!r} to {presetmod.saved_dir() / (name + '.toml')}")
                self.load(select=name)

        self.screen.app.push_screen(SaveAsModal(source.name, cfg), saved)
