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
from amptui.dashboard.screens.keys import why_off


def key_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """(key, what it does, why not now) for the screen's keys, then the app's; keys as the user's
    keymap (amptui's config file) has them. One row per action: its keys side by side ("/, f  Filter"),
    not a row for each alias saying the same thing."""
    app = screen.app
    keymap = getattr(app, "user_keymap", {})
    keys: dict[tuple[str, str], list[str]] = {}  # (action, description) -> its keys, in order
    for binding in [*screen.BINDINGS, *app.BINDINGS, Binding("ctrl+p", "command_palette", "Command palette")]:
        if not isinstance(binding, Binding) or binding.action.startswith("why_not"):
            continue
        shown = keys.setdefault((binding.action, binding.description or binding.action), [])
        for key in keys_of(binding, keymap):
            display = app.get_key_display(Binding(key, binding.action))
            if display not in shown:
                shown.append(display)
    rows = [(", ".join(shown), what, why_off(screen, action.split("(")[0]) or "") for (action, what), shown in keys.items()]
    # KEY_HELP, not Textual's HELP (a widget's markdown for its help panel): keys that BINDINGS cannot show
    for key, what in getattr(screen, "KEY_HELP", {}).items():
        rows.append((key, what, ""))
    return rows


CLOSE_HINT = "escape closes · ctrl+p opens the command palette"
DIALOG_SHARE = 0.9   # #help-dialog's max-height (amptui.tcss)
DIALOG_CHROME = 6    # its border (2), padding (2), title and hint lines (2)


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
            yield Static(CLOSE_HINT, classes="hint", id="help-hint")

    def on_resize(self) -> None:
        """The key list gets the rows the screen has left (a dialog of `height: auto` would let it
        run past the screen's bottom edge, clipped and unscrollable at 80x24)."""
        keys = self.query_one("#help-keys", VerticalScroll)
        keys.styles.max_height = max(3, int(self.size.height * DIALOG_SHARE) - DIALOG_CHROME)
        self.call_after_refresh(self._show_hint)

    def on_mount(self) -> None:
        keys = self.query_one("#help-keys", VerticalScroll)
        keys.focus()  # the arrow keys and page keys scroll it
        for name in ("scroll_y", "show_vertical_scrollbar"):  # scrolled; more or fewer rows than room
            self.watch(keys, name, lambda _: self._show_hint(), init=False)
        self.call_after_refresh(self._show_hint)

    def _show_hint(self) -> None:
        """Say that the list scrolls, and how, while part of it is out of sight."""
        keys = self.query_one("#help-keys", VerticalScroll)
        if keys.max_scroll_y <= 0:
            hint = Text(CLOSE_HINT)
        elif keys.scroll_y < keys.max_scroll_y:
            hint = Text.assemble(("▼ more keys: ↓ pgdn", "bold"), " · ", CLOSE_HINT)
        else:
            hint = Text.assemble(("▲ more keys: ↑ pgup", "bold"), " · ", CLOSE_HINT)
        self.query_one("#help-hint", Static).update(hint)

    def action_close(self) -> None:
        self.dismiss(None)
