"""t on the home screen: the tune's budget (the CLI's `tune --budget`), asked before the search starts."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from amptui.core.errors import UserError
from amptui.tune import plan as T


class TuneStartModal(ModalScreen[float | None]):
    """Answers the budget in minutes, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, preset_name: str, kept: dict, hint: str = ""):
        super().__init__(classes="modal")
        self.preset_name = preset_name
        self.kept = kept
        self.hint = hint  # a script's tune: what its trials are, instead of the preset's

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="tune-start-dialog"):
            yield Static(f"Tune {self.preset_name}: the fastest setup that keeps fp32's accuracy",  # wraps, never cut
                         id="tune-start-title", markup=False)
            yield Static(self.hint or "Short real runs, one after another, in the background: precision, then "
                         "torch.compile and the batch size. " + T.toggles_words(self.kept), classes="hint",
                         id="tune-start-toggles", markup=False)
            with Horizontal(id="tune-budget-row"):
                yield Label("budget, minutes ", id="tune-budget-label")
                yield Input(value=f"{T.DEFAULT_BUDGET_MIN:g}", id="tune-budget", compact=True)
            yield Static("", id="tune-budget-msg")
            yield Static("enter starts · escape cancels · the search stops when the budget is spent", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#tune-budget", Input).focus()

    @on(Input.Changed, "#tune-budget")
    def _changed(self, event: Input.Changed) -> None:
        self._check(event.value)

    def _check(self, text: str) -> float | None:
        msg = self.query_one("#tune-budget-msg", Static)
        try:
            minutes = T.parse_budget(text)
        except UserError as exc:
            msg.update(str(exc))
            self.query_one("#tune-budget", Input).add_class("-invalid")
            return None
        msg.update("")
        self.query_one("#tune-budget", Input).remove_class("-invalid")
        return minutes

    @on(Input.Submitted, "#tune-budget")
    def _submitted(self, event: Input.Submitted) -> None:
        minutes = self._check(event.value)
        if minutes is not None:
            self.dismiss(minutes)

    def action_cancel(self) -> None:
        self.dismiss(None)
