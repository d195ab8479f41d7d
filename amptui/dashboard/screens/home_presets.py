"""Home screen presets: the list (filtered by `/` like the runs), the highlighted preset's toggles,
and what the user typed in them, kept per preset (also on disk)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from amptui.core.config import presets as presetmod
from amptui.core.errors import UserError
from amptui.dashboard import toggle_edits
from amptui.dashboard.filestamps import PresetsStamp
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.widgets.runtable import RunTable
from amptui.dashboard.widgets.toggles import TogglesPanel

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = DashboardScreen
else:
    _Screen = object


class PresetList(OptionList):
    """The presets. Shift+Tab goes back to the widget before it on screen, the last toggle (Runs,
    below, is one Tab after the toggles)."""

    BINDINGS = [Binding("shift+tab", "previous_widget", "Previous", show=False)]

    def action_previous_widget(self) -> None:
        self.screen.query_one(TogglesPanel).focus_last()


class PresetActions(_Screen):
    # what it reads and sets on the home screen (HomeScreen.__init__ sets them)
    presets: list[presetmod.Preset]  # as last listed
    preset: presetmod.Preset | None  # the highlighted preset
    _edits: dict[str, dict[str, Any]]  # preset -> toggles as left (toggle_edits keeps them on disk)
    _pristine: dict[str, Any]  # the current preset's toggles as loaded
    _presets_stamp: PresetsStamp  # the saved presets as last listed

    def load_presets(self, select: str | None = None) -> None:
        option_list = self.query_one("#presets", OptionList)
        current = select or (self.preset.name if self.preset else None)
        self.presets = presetmod.list_presets()
        option_list.clear_options()
        width = max((len(p.name) for p in self.presets), default=10)
        words = self.query_one(RunTable).filter_words  # `/` filters presets and runs alike
        listed = [p for p in self.presets if all(w in f"{p.name} {p.description}".lower() for w in words)]
        for p in listed:
            tag = ("built-in", "dim") if p.builtin else ("saved", "green")
            option_list.add_option(Option(Text.assemble(p.name.ljust(width + 1), tag), id=p.name))
        names = [p.name for p in listed]
        index = names.index(current) if current in names else 0
        if listed:
            option_list.highlighted = index
            if listed[index] != self.preset:  # the same preset, unchanged: its toggles stay as they are
                self.show_preset(listed[index])
        else:  # the filter hides every preset: no toggles of one it hides
            self.show_no_preset(f"no preset matches the filter {' '.join(words)!r}")

    def show_no_preset(self, why: str) -> None:
        """No preset shown: the toggles say why, and r, a and t refuse with that reason."""
        toggles = self.query_one(TogglesPanel)
        if self.preset is not None and not toggles.invalid_preset:
            self._keep_edits()
        self.preset = None
        self._pristine = {}
        self.query_one("#preset-desc", Static).update(Text(why, style="italic"))
        toggles.load_invalid(why)

    def _presets_changed(self, stamp: PresetsStamp) -> None:
        """Presets saved, replaced or deleted by another process (a CLI `presets save`, a tune's
        winner) appear and go without a restart."""
        if stamp != self._presets_stamp:
            self._presets_stamp = stamp
            self.load_presets()

    def show_preset(self, preset: presetmod.Preset) -> None:
        toggles = self.query_one(TogglesPanel)
        if self.preset is not None and not toggles.invalid_preset:  # keep what the user typed, per preset
            self._keep_edits()
        self.preset = preset
        desc = self.query_one("#preset-desc", Static)
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

    def _keep_edits(self) -> None:
        """What the user typed in the current preset's toggles, kept per preset (also on disk)."""
        if self.preset is None or self.query_one(TogglesPanel).invalid_preset:
            return
        state = self.query_one(TogglesPanel).state()
        edited = state if state != self._pristine else None
        if edited != self._edits.get(self.preset.name):
            self._edits.pop(self.preset.name, None)
            if edited:
                self._edits[self.preset.name] = edited
            toggle_edits.remember(self.preset.name, edited)

    def action_focus_presets(self) -> None:
        self.query_one("#presets", OptionList).focus()
