"""The highlighted preset's toggles as real widgets, validated as you type with the CLI's rules."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.validation import ValidationResult, Validator
from textual.widgets import Input, Label, Select, Static, Switch

from ...core import config as cfgmod
from ...core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Toggle:
    key: str       # dotted schema key
    label: str
    kind: str      # switch | select | input
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def wid(self) -> str:
        return "t-" + self.key.replace(".", "-").replace("_", "-")


def _choices(key: str) -> tuple[tuple[str, Any], ...]:
    section, name = key.split(".")
    return tuple((c, c) for c in cfgmod.SCHEMA[section][name].choices or ())


TOGGLES: tuple[Toggle, ...] = (
    Toggle("amp.autocast", "autocast", "switch"),
    Toggle("amp.grad_scaler", "GradScaler", "select", (("auto", "auto"), ("on", True), ("off", False))),
    Toggle("amp.dtype", "dtype", "select", _choices("amp.dtype")),
    Toggle("dist.mode", "parallel", "select", _choices("dist.mode")),
    Toggle("run.device", "device", "select", _choices("run.device")),
    Toggle("dist.nproc_per_node", "nproc", "input"),
    Toggle("data.batch_size", "batch size", "input"),
    Toggle("optim.lr", "lr", "input"),
    Toggle("run.epochs", "epochs", "input"),
    Toggle("run.max_steps", "max steps", "input"),
)
BY_KEY = {t.key: t for t in TOGGLES}


def parse_text(key: str, text: str) -> Any:
    """Input text -> a checked value for `key`, with the same parsing and rules as `--set`.

    Raises ConfigError with a one-line reason."""
    raw = text.strip()
    label = BY_KEY[key].label if key in BY_KEY else key
    if not raw:
        raise ConfigError(f"{label}: {key} needs a value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return cfgmod.check_value(key, value, label)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") and "e" not in text else text
    return str(value)


class KeyValidator(Validator):
    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_text(self.key, value)
        except ConfigError as exc:
            return self.failure(str(exc))
        return self.success()


def _cuda_visible() -> bool:
    """A cheap guess (no torch import) used only for wording: is there an NVIDIA driver?"""
    import os

    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")


class TogglesPanel(Vertical):
    """Holds the values of the current preset plus what the user changed."""

    class Changed(Message):
        def __init__(self, panel: "TogglesPanel") -> None:
            super().__init__()
            self.panel = panel

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.base: dict[str, dict[str, Any]] = cfgmod.defaults()
        self._loading = False
        self.cuda = _cuda_visible()

    def compose(self) -> ComposeResult:
        with Grid(id="toggle-grid"):
            for t in TOGGLES:
                yield Label(t.label, classes="toggle-label")
                if t.kind == "switch":
                    with Horizontal(classes="switch-cell"):
                        yield Switch(id=t.wid, classes="toggle")
                        yield Static("on", id=f"{t.wid}-state", classes="switch-state")
                elif t.kind == "select":
                    yield Select(t.options, id=t.wid, allow_blank=False, compact=True, classes="toggle")
                else:
                    yield Input(id=t.wid, compact=True, classes="toggle", validators=[KeyValidator(t.key)],
                                validate_on=["changed", "submitted"])
        yield Static(id="toggle-summary")
        yield Static(id="toggle-error")

    def load(self, values: dict[str, dict[str, Any]]) -> None:
        """Show a preset's values (a full config dict)."""
        self._loading = True
        self.base = values
        for t in TOGGLES:
            section, name = t.key.split(".")
            value = values[section][name]
            widget = self.query_one(f"#{t.wid}")
            if isinstance(widget, Switch):
                widget.value = bool(value)
            elif isinstance(widget, Select):
                widget.value = value
            elif isinstance(widget, Input):
                widget.value = format_value(value)
        self.call_after_refresh(self._loaded)

    def _loaded(self) -> None:
        self._loading = False
        self.refresh_summary()

    def errors(self) -> list[str]:
        out = []
        for t in TOGGLES:
            if t.kind == "input":
                try:
                    parse_text(t.key, self.query_one(f"#{t.wid}", Input).value)
                except ConfigError as exc:
                    out.append(str(exc))
        return out

    def overrides(self) -> dict[str, Any]:
        """{dotted key: value} of every toggle (raises ConfigError on the first invalid one)."""
        out: dict[str, Any] = {}
        for t in TOGGLES:
            widget = self.query_one(f"#{t.wid}")
            if isinstance(widget, Switch):
                out[t.key] = bool(widget.value)
            elif isinstance(widget, Select):
                out[t.key] = widget.value
            else:
                out[t.key] = parse_text(t.key, widget.value)
        return out

    def values(self) -> dict[str, dict[str, Any]]:
        """The full config: the preset with the toggles applied, checked like the CLI does."""
        return cfgmod.build_config(self.base, self.overrides(), source="preset",
                                   overrides_source="toggles").to_dict()

    def refresh_summary(self) -> None:
        summary = self.query_one("#toggle-summary", Static)
        error = self.query_one("#toggle-error", Static)
        for t in TOGGLES:
            if t.kind == "switch":
                on = self.query_one(f"#{t.wid}", Switch).value
                self.query_one(f"#{t.wid}-state", Static).update("on" if on else "off")
        try:
            values = self.values()
        except ConfigError as exc:
            summary.update("")
            error.update(f"✗ {exc}")
            error.display = True
            summary.display = False
            self.add_class("-invalid")
            return
        self.remove_class("-invalid")
        error.update("")
        error.display = False
        summary.display = True
        device = values["run"]["device"]
        dtype = device if device != "auto" else ("cuda" if self.cuda else "cpu")
        words = cfgmod.precision_words(values, dtype)
        ws = cfgmod.world_size(values)
        par = {"none": "1 process", "dp": "DataParallel", "ddp": f"DDP x{ws}"}[values["dist"]["mode"]]
        steps = values["run"]["max_steps"]
        epochs = values["run"]["epochs"]
        extent = f"{epochs} epoch{'s' if epochs != 1 else ''}" + (f", at most {steps} steps" if steps else "")
        summary.update(f"→ {words} · {par} on {dtype} · {extent}")

    def show_refusal(self, message: str) -> None:
        """A reason the launcher gave (preflight: hardware, data); stays until the next change."""
        error = self.query_one("#toggle-error", Static)
        error.update(f"✗ {message}")
        error.display = True

    @on(Switch.Changed)
    @on(Select.Changed)
    @on(Input.Changed)
    def _changed(self, event: Message) -> None:
        event.stop()
        if self._loading:
            return
        self.refresh_summary()
        self.post_message(self.Changed(self))
