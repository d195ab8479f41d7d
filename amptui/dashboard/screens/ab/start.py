"""a on the home screen, when the A/B would be long: how long, on what basis, and a shorter setting
(fewer steps) before anything starts."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class AbStartModal(ModalScreen[str | None]):
    """Answers "start", "shorter" (run.max_steps = the estimate's shorter_steps) or None (cancel)."""

    BINDINGS = [Binding("y", "answer('start')", "Start"), Binding("s", "answer('shorter')", "Shorter"),
                Binding("n", "answer(None)", "Cancel"), Binding("escape", "answer(None)", "Cancel", show=False)]

    def __init__(self, preset_name: str, estimate: dict[str, Any]):
        super().__init__(classes="modal")
        self.preset_name = preset_name
        self.estimate = estimate

    def compose(self) -> ComposeResult:
        steps = self.estimate.get("shorter_steps", 10)
        with Vertical(classes="dialog", id="ab-start-dialog"):
            yield Static(f"A/B of {self.preset_name}: {self.estimate.get('words', '')}", classes="question",
                         id="ab-start-estimate", markup=False)
            yield Static(f"Shorter: {steps} steps per variant (run.max_steps = {steps}) gives a first comparison "
                         "in about two minutes.", classes="hint", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Start (y)", variant="error", id="start")
                yield Button(f"Shorter: {steps} steps (s)", variant="primary", id="shorter")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#shorter", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
