"""`o` on the home screen: the runs folders this user has used (core/run/folders.py: every run,
A/B, tune, Monitor and script run records its own), to switch the dashboard to another one."""

from __future__ import annotations

import os
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from amptui.core.fmt import shown
from amptui.core.run.folders import used_folders


def folder_choices(current: Path) -> list[Path]:
    """The current runs folder first, then the others used, most recently used first."""
    here = os.path.realpath(current)
    return [Path(here)] + [f for f in used_folders() if os.path.realpath(f) != here]


class RunsFolderChooser(ModalScreen["Path | None"]):
    """Pick a runs folder (enter) or keep the current one (escape)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: Path):
        super().__init__(classes="modal")
        self.current = current
        self.choices = folder_choices(current)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="folders-dialog"):
            yield Static("Runs folders you have used (enter: open, escape: stay)", classes="question")
            yield OptionList(*[Option(shown(str(p)) + ("  (open now)" if i == 0 else ""), id=str(i))
                               for i, p in enumerate(self.choices)], id="folders-list")
            if len(self.choices) == 1:
                yield Static("no other runs folder yet: each `amptui run`, A/B or Monitor records its own",
                             classes="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected, "#folders-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        index = int(event.option.id or 0)
        self.dismiss(None if index == 0 else self.choices[index])

    def action_cancel(self) -> None:
        self.dismiss(None)
