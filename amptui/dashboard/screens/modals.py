"""Small dialogs: confirm (y/n) and save-as (a validated preset name, no silent overwrite)."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from amptui.core import safefile
from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.config.values import TOML_LIMIT
from amptui.core.errors import UserError
from amptui.core.fmt import shown
from amptui.core.run import runops
from amptui.core.run.runfiles import RunFolder


class ConfirmModal(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n", "answer(False)", "No"),
                Binding("escape", "answer(False)", "Cancel", show=False)]

    def __init__(self, question: str, yes: str = "Yes", no: str = "No"):
        super().__init__(classes="modal")
        self.question = question
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button(f"{self.no} (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class SaveAsModal(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, source: str, cfg: cfgmod.Config):
        super().__init__(classes="modal")
        self.source = source
        self.cfg = cfg
        self._confirm_overwrite: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Save the current toggles of {self.source!r} as a new preset")
            yield Input(placeholder="preset name, e.g. quickstart-fp32", id="name")
            yield Static("", id="save-msg")
            yield Static(f"saved to {presetmod.saved_dir()}/NAME.toml · enter saves · esc cancels",
                         classes="hint")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def _problem(self, name: str) -> tuple[str, bool]:
        """(message, fatal). Non-fatal: it exists; enter again overwrites."""
        if not name:
            return "type a name", True
        try:
            presetmod.check_name(name)
        except UserError as exc:
            return str(exc), True
        if (presetmod.BUILTIN_DIR / f"{name}.toml").exists():
            return f"{name!r} is a built-in preset; choose another name", True
        if (presetmod.saved_dir() / f"{name}.toml").exists():
            return f"a saved preset {name!r} exists: press enter again to overwrite it", False
        return "", False

    @on(Input.Changed, "#name")
    def _changed(self, event: Input.Changed) -> None:
        self._confirm_overwrite = None
        message, fatal = self._problem(event.value.strip())
        msg = self.query_one("#save-msg", Static)
        msg.update(message if event.value else "")
        msg.set_class(fatal and bool(event.value), "-error")
        event.input.set_class(fatal and bool(event.value), "-invalid")

    @on(Input.Submitted, "#name")
    def _submitted(self, event: Input.Submitted) -> None:
        name = event.value.strip()
        message, fatal = self._problem(name)
        msg = self.query_one("#save-msg", Static)
        if fatal:
            msg.update(message)
            msg.add_class("-error")
            return
        exists = bool(message)
        if exists and self._confirm_overwrite != name:
            self._confirm_overwrite = name
            msg.update(message)
            return
        cfg = self.cfg
        if cfg.run.name in ("", self.source):
            cfg = cfg.with_overrides({"run.name": name})
        try:
            presetmod.save_preset(name, cfg, force=exists, source=self.source)
        except UserError as exc:
            msg.update(str(exc))
            msg.add_class("-error")
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class RunInfoModal(ModalScreen[None]):
    """A run's equivalent command line and its resolved config (config.toml)."""

    BINDINGS = [Binding("escape,q,i", "close", "Close")]

    def __init__(self, run_dir: Path, runs_display: str | None = None):
        super().__init__(classes="modal")
        self.run_dir = Path(run_dir)
        self.runs_display = runs_display

    def compose(self) -> ComposeResult:
        from rich.syntax import Syntax  # pygments: loaded only when a run's info opens

        try:
            command = runops.equivalent_command(self.run_dir, self.runs_display)
        except UserError as exc:
            command = f"(cannot tell: {exc})"
        try:
            config = shown(safefile.read_text(RunFolder(self.run_dir).config, TOML_LIMIT), newlines=True)
        except (OSError, ValueError) as exc:
            config = f"# cannot read config.toml: {exc}"
        with Vertical(classes="dialog", id="info-dialog"):
            yield Label(f"Run {self.run_dir.name}")
            script_run = command.split()[2:3] in (["--script"], ["-m"])  # equivalent_command: "amptui run --script F"
            yield Static("the same script again (its arguments are not recorded: add them after --; its own "
                         "loop decides the rest):" if script_run else
                         "the same run again (resolved values, auto decided for the machine it ran on):",
                         classes="hint")
            yield Static(shown(command), id="info-command", markup=False)
            with VerticalScroll(id="info-config"):
                yield Static(Syntax(config, "toml", word_wrap=True, background_color="default"), id="info-toml")
            yield Static("escape closes · the command can be copied with the mouse (shift+drag in most terminals)",
                         classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
