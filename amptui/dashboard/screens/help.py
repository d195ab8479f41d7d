"""? / F1: every key of the screen underneath, generated from its BINDINGS (so it never drifts)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from amptui.dashboard.keymap import keys_of


def key_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """(key, what it does, why not now) for the screen's keys, then the app's; keys as the user's
    keymap (amptui's config file) has them."""
    app = screen.app
    keymap = getattr(app, "user_keymap", {})
    rows: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    for binding in [*screen.BINDINGS, *app.BINDINGS, Binding("ctrl+p", "command_palette", "Command palette")]:
        if not isinstance(binding, Binding) or binding.action.startswith("why_not"):
            continue
        for key in keys_of(binding, keymap):
            if (key, binding.action) in seen:
                continue
            seen.add((key, binding.action))
            refusal = getattr(screen, "refusal", lambda a: None)(binding.action.split("(")[0])
            rows.append((app.get_key_display(Binding(key, binding.action)), binding.description or binding.action,
                         refusal or ""))
    # KEY_HELP, not Textual's HELP (a widget's markdown for its help panel): keys that BINDINGS cannot show
    for key, what in getattr(screen, "KEY_HELP", {}).items():
        rows.append((key, what, ""))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def __init__(self, screen: Screen):
        super().__init__(classes="modal")
        self.under = screen

    def compose(self) -> ComposeResult:
        self.rows = key_rows(self.under)
        table = Table(box=None, show_header=False, pad_edge=False, expand=True)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(ratio=1)
        for key, what, why_not in self.rows:
            table.add_row(key, Text.assemble(what, (f"  (not now: {why_not})" if why_not else "", "dim")))
        name = type(self.under).__name__.removesuffix("Screen").lower() or "this"
        with Vertical(classes="dialog", id="help-dialog"):
            yield Static(Text(f"Keys of the {name} screen", style="bold"))
            with VerticalScroll(id="help-keys"):
                yield Static(table, id="help-table")
            yield Static("escape closes · ctrl+p opens the command palette", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
