"""The home screen's `e`: run a script of your own, by path, with its arguments, recorded as
`amptui run --script` records it (an unmodified script is watched through its hooks)."""

from __future__ import annotations

import os
import shlex

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


def script_command(text: str) -> tuple[list[str] | None, str]:
    """"train.py --lr 1e-3" -> (["train.py", "--lr", "1e-3"], "") or (None, why not)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return None, f"cannot read that line: {exc}"
    if not words:
        return None, "type a script's path, then its arguments"
    if not os.path.isfile(words[0]):
        return None, f"{words[0]}: no such file (relative to {os.getcwd()})"
    return words, ""


class ScriptModal(ModalScreen[list[str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Run a training script of your own (it needs no amptui in it)")
            yield Input(placeholder="train.py --epochs 3", id="script")
            yield Static("", id="script-msg")
            yield Static("path, then its arguments · enter runs it · esc cancels", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#script", Input).focus()

    @on(Input.Submitted, "#script")
    def _submitted(self, event: Input.Submitted) -> None:
        words, problem = script_command(event.value)
        if words is None:
            msg = self.query_one("#script-msg", Static)
            msg.update(problem)
            msg.add_class("-error")
            return
        self.dismiss(words)

    def action_cancel(self) -> None:
        self.dismiss(None)
