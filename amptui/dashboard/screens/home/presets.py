"""Home screen presets: the list (filtered by `/` like the runs), the highlighted preset's toggles,
and what the user typed in them, kept per preset (also on disk). PresetsPane is the widget that holds
the list, the description and the toggles and reacts to their messages (a preset highlighted, the
toggles edited); the screen tells it the filter and asks it for the preset and its toggles."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.errors import ConfigError, UserError
from amptui.core.fmt import shown
from amptui.dashboard import toggle_edits
from amptui.dashboard.filestamps import PresetsStamp, presets_stamp
from amptui.dashboard.notice import Notice
from amptui.dashboard.widgets.toggles import TogglesPanel
from amptui.dashboard.widgets.wordline import WordLine

FIX_TOGGLES = "Fix the toggles first"


class PresetList(OptionList):
    """The presets. Shift+Tab goes back to the widget before it on screen, the last toggle (Runs,
    below, is one Tab after the toggles)."""

    BINDINGS = [Binding("shift+tab", "previous_widget", "Previous", show=False)]

    def action_previous_widget(self) -> None:
        self.query_ancestor(PresetsPane).toggles.focus_last()


class PresetsPane(Horizontal):
    """The presets as last listed (`presets`), the highlighted one (`preset`), its description and
    toggles, and the toggle edits kept per preset. `filter_words`: the `/` filter's words."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.presets: list[presetmod.Preset] = []  # as last listed
        self.preset: presetmod.Preset | None = None  # the highlighted preset
        self.filter_words: list[str] = []
        self._edits: dict[str, dict[str, Any]] = toggle_edits.load()  # preset -> toggles as left (kept on disk)
        self._pristine: dict[str, Any] = {}  # the current preset's toggles as loaded
        self._stamp = presets_stamp()  # the saved presets as last listed

    def compose(self) -> ComposeResult:
        with Vertical(id="presets-box"):
            yield PresetList(id="presets")
        with Vertical(id="toggles-box"):
            yield WordLine(id="preset-desc")
            yield TogglesPanel(id="toggles")

    def on_mount(self) -> None:
        self.query_one("#presets-box").border_title = "Presets"
        self.query_one("#toggles-box").border_title = "Toggles"

    @property
    def toggles(self) -> TogglesPanel:
        return self.query_one(TogglesPanel)

    def load(self, select: str | None = None) -> None:
        """List the presets again (and highlight `select`, or the one highlighted)."""
        self.presets = presetmod.list_presets()
        self._list(select)

    def refilter(self, words: list[str]) -> None:
        """The `/` filter changed: the presets as last listed, filtered anew (a key press reads no file)."""
        self.filter_words = words
        self._list()

    def _list(self, select: str | None = None) -> None:
        option_list = self.query_one(PresetList)
        current = select or (self.preset.name if self.preset else None)
        option_list.clear_options()
        width = max((len(shown(p.name)) for p in self.presets), default=10)
        words = self.filter_words  # `/` filters presets and runs alike
        listed = [p for p in self.presets if all(w in f"{p.name} {p.description}".lower() for w in words)]
        for p in listed:
            tag = ("built-in", "dim") if p.builtin else ("saved", "green")
            option_list.add_option(Option(Text.assemble(shown(p.name).ljust(width + 1), tag), id=p.name))
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
        if self.preset is not None and not self.toggles.invalid_preset:
            self.keep_edits()
        self.preset = None
        self._pristine = {}
        self.query_one("#preset-desc", WordLine).update(Text(why, style="italic"))
        self.toggles.load_invalid(why)

    def changed_on_disk(self, stamp: PresetsStamp) -> None:
        """Presets saved, replaced or deleted by another process (a CLI `presets save`, a tune's
        winner) appear and go without a restart."""
        if stamp != self._stamp:
            self._stamp = stamp
            self.load()

    @on(OptionList.OptionHighlighted, "#presets")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """The list's highlight moved to a preset: its toggles. Not a highlight the list no longer shows:
        keys typed fast into the `/` filter relist it before the last listing's highlight arrives."""
        if event.option_list.highlighted_option is not event.option:
            return
        preset = next((p for p in self.presets if p.name == event.option.id), None)
        if preset is not None and preset != self.preset:
            self.show(preset)

    @on(OptionList.OptionSelected, "#presets")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#t-amp-autocast").focus()

    @on(TogglesPanel.Edited)
    def _edited(self) -> None:
        self.keep_edits()

    def show(self, preset: presetmod.Preset) -> None:
        toggles = self.toggles
        if self.preset is not None and not toggles.invalid_preset:  # keep what the user typed, per preset
            self.keep_edits()
        self.preset = preset
        desc = self.query_one("#preset-desc", WordLine)
        try:
            cfg = preset.config()
        except UserError as exc:
            desc.update(Text(shown(f"{preset.name}: cannot load: {exc}"), style="red"))
            toggles.load_invalid(shown(f"preset {preset.name} cannot load: {exc}"))
            self._pristine = {}
            return
        kind = "built-in" if preset.builtin else f"saved · {shown(preset.path)}"
        toggles.load(cfg)
        self._pristine = toggles.state()
        edited = self._edits.get(preset.name)
        if edited:
            toggles.restore(edited)
        desc.update(Text.assemble((shown(preset.name), "bold"), f" ({kind}) ",
                                  ("✎ your edits, kept " if edited else "", "bold yellow"),
                                  (shown(preset.description), "italic")))

    def keep_edits(self) -> None:
        """What the user typed in the current preset's toggles, kept per preset (also on disk)."""
        toggles = self.toggles
        if self.preset is None or toggles.invalid_preset:
            return
        state = toggles.state()
        edited = state if state != self._pristine else None
        if edited != self._edits.get(self.preset.name):
            self._edits.pop(self.preset.name, None)
            if edited:
                self._edits[self.preset.name] = edited
            toggle_edits.remember(self.preset.name, edited)

    def values(self) -> cfgmod.Config | Notice:
        """The toggles as a config, or a notice saying what to fix first (the toggles show it too)."""
        try:
            return self.toggles.values()
        except ConfigError as exc:
            self.toggles.refresh_summary()
            return Notice(str(exc), title=FIX_TOGGLES, severity="error")

    def changed_toggles(self) -> dict[str, Any] | Notice:
        """The toggles that differ from the preset, or a notice when one is invalid or this machine
        cannot run them."""
        cfg = self.values()
        if isinstance(cfg, Notice):
            return cfg
        toggles = self.toggles
        problem = toggles.hardware_problem()
        if problem:
            toggles.refresh_summary()
            return Notice(problem, title=FIX_TOGGLES, severity="error")
        return {key: value for key, value in toggles.overrides().items() if toggles.base.get(key) != value}
