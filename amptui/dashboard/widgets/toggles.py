"""The highlighted preset's toggles as real widgets, validated as you type with the CLI's rules.
Beside the keys, a "precision" select offers every precision mode's variants (modes.MODES, read
when the panel is made: a new mode is offered with no edit here): picking one sets the precision
rows (and keeps what they cannot show, amp.tf32 for one); it shows the variant the rows form.
The rows and their rules: togglerows.py."""

from __future__ import annotations

from typing import Any, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label, Select, Static, Switch

from amptui.core.config import values as cfgmod
from amptui.core.config.precision import Precision
from amptui.core.errors import ConfigError
from amptui.core.run.runops import gpu_count_guess
from amptui.dashboard.widgets.togglerows import (
    BY_KEY,
    OTHER,
    PRECISION_ID,
    TOGGLES,
    KeyValidator,
    Toggle,
    cuda_visible,
    dp_problem,
    format_value,
    parse_text,
    precision_variants,
    variant_keys,
    variant_of,
)
from amptui.dashboard.widgets.wordline import WordLine
from amptui.machine.dtype_speed import summary_note


class ToggleInput(Input):
    """A toggle's text field: letters type into it; Escape leaves it (back to the presets list) so
    the screen's keys (r, a, s, ...) work again. The footer says so while the field has the focus."""

    BINDINGS = [Binding("escape", "leave", "Leave field (then r a s …)")]

    def action_leave(self) -> None:
        leave = getattr(self.screen, "action_focus_presets", None)
        if leave is not None:
            leave()
        else:
            self.screen.set_focus(None)


NARROW_BELOW = 40  # panel columns under which the toggles go one label and value a row (both pairs: 2 x (11 + 8))


class TogglesPanel(Vertical):
    """Holds the values of the current preset plus what the user changed."""

    class Edited(Message):
        """The user changed a toggle (not a preset being loaded)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.base = cfgmod.Config()  # the preset's values, before the toggles
        # until the first preset is shown (load, load_invalid): the widgets' own Changed messages as they
        # mount are no edit, and blank rows are no config to check (nor a red "needs a value" flashed)
        self._loading = True
        self.cuda = cuda_visible()
        self.gpus = gpu_count_guess()
        self.invalid_preset = ""  # why the preset cannot load: its toggles are blank and disabled
        self.variants = precision_variants()
        self.extras: dict[str, Any] = {}  # the chosen variant's keys that no row shows (amp.tf32)

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
                    yield ToggleInput(id=t.wid, compact=True, classes="toggle", validators=[KeyValidator(t.key)],
                                      validate_on=["changed", "submitted"])
            yield Label("precision", classes="toggle-label")
            yield Select([(v, v) for v in [*self.variants, OTHER]], id=PRECISION_ID, allow_blank=False, compact=True,
                         classes="toggle", tooltip="every precision mode's variants: picking one sets the rows")
        yield WordLine(id="toggle-summary")
        yield Static(id="toggle-speed")  # a slow precision here, or auto falling back to float32
        yield Static(id="toggle-error")

    def on_resize(self, event: Any) -> None:
        self.query_one("#toggle-grid").set_class(event.size.width < NARROW_BELOW, "narrow")

    def load(self, cfg: cfgmod.Config) -> None:
        """Show a preset's values."""
        self._loading = True
        self.base = cfg
        self.invalid_preset = ""
        grid = self.query_one("#toggle-grid")
        grid.disabled, grid.display = False, True
        for t in TOGGLES:
            value = cfg.get(t.key)
            widget = self.query_one(f"#{t.wid}")
            if isinstance(widget, Switch):
                widget.value = bool(value)
            elif isinstance(widget, Select):
                widget.value = value
            elif isinstance(widget, Input):
                widget.value = format_value(value)
        self.extras = {}
        self._precision.value = variant_of(cfg, self._device_type(cfg), self.variants)
        self.call_after_refresh(self._loaded)

    def load_invalid(self, reason: str) -> None:
        """A preset that cannot load: no values shown (defaults are not its values), nothing editable."""
        self._loading = True
        self.invalid_preset = reason
        self.base = cfgmod.Config()
        for t in TOGGLES:
            widget = self.query_one(f"#{t.wid}")
            if isinstance(widget, Input):
                widget.value = ""
            elif isinstance(widget, Switch):
                widget.value = False
        grid = self.query_one("#toggle-grid")  # selects cannot be blank: the whole grid goes
        grid.disabled, grid.display = True, False
        self.call_after_refresh(self._loaded)

    def focus_last(self) -> None:
        if self.invalid_preset:
            self.screen.focus_previous()
        else:
            self.query_one(f"#{TOGGLES[-1].wid}").focus()

    @property
    def _precision(self) -> Select[str]:
        return cast("Select[str]", self.query_one(f"#{PRECISION_ID}"))

    def _device_type(self, cfg: cfgmod.Config) -> str:
        return cfg.run.device if cfg.run.device != "auto" else ("cuda" if self.cuda else "cpu")

    def _apply_variant(self, variant: str) -> None:
        """The user picked `variant`: the precision rows take its values, its other keys are kept."""
        rows, self.extras = variant_keys(variant)
        with self.prevent(Switch.Changed, Select.Changed):
            for key, value in rows.items():
                self._widget(BY_KEY[key]).value = value

    def _sync_precision(self) -> None:
        """A row changed: the select keeps its variant while the toggles still make it, else shows
        the variant they form now (and the kept keys go)."""
        try:
            cfg = self.values()
        except ConfigError:
            return
        chosen = str(self._precision.value)
        device_type = self._device_type(cfg)
        if chosen in self.variants and Precision.from_config(cfg, device_type) == Precision.from_variant(chosen):
            return
        self.extras = {}
        with self.prevent(Select.Changed):
            self._precision.value = variant_of(self.values(), device_type, self.variants)

    def _widget(self, t: Toggle) -> Switch | Select[Any] | Input:
        """The widget of toggle `t`: a Switch, Select or Input, as its kind says (compose)."""
        return cast("Switch | Select[Any] | Input", self.query_one(f"#{t.wid}"))

    def state(self) -> dict[str, Any]:
        """What the widgets hold, as typed (kept per preset when the highlight moves)."""
        return {**{t.key: self._widget(t).value for t in TOGGLES}, "precision": self._precision.value}

    def restore(self, state: dict[str, Any]) -> None:
        self._loading = True
        for t in TOGGLES:
            if t.key in state:
                widget, value = self._widget(t), state[t.key]
                # the state file is data: an Input holds text, a Switch a bool (else it breaks at render)
                if (isinstance(widget, Input) and not isinstance(value, str)) or (
                        isinstance(widget, Switch) and not isinstance(value, bool)):
                    continue
                try:
                    widget.value = value
                except Exception:  # noqa: BLE001 - a remembered value the widget no longer offers
                    pass
        chosen = state.get("precision")
        if chosen in self.variants:  # a remembered pick: its keys no row shows come back with it
            self._precision.value = chosen
            self.extras = variant_keys(chosen)[1]
        self._sync_precision()
        self.call_after_refresh(self._loaded)

    def _loaded(self) -> None:
        self._loading = False
        self.refresh_summary()

    def overrides(self) -> dict[str, Any]:
        """{dotted key: value} of every toggle (raises ConfigError on the first invalid one)."""
        out: dict[str, Any] = dict(self.extras)
        for t in TOGGLES:
            widget = self._widget(t)
            if isinstance(widget, Switch):
                out[t.key] = bool(widget.value)
            elif isinstance(widget, Select):
                out[t.key] = widget.value
            else:
                out[t.key] = parse_text(t.key, widget.value)
        return out

    def values(self) -> cfgmod.Config:
        """The full config: the preset with the toggles applied, checked like the CLI does."""
        if self.invalid_preset:
            raise ConfigError(self.invalid_preset)
        return cfgmod.build_config(self.base, self.overrides(), source="preset", overrides_source="toggles")

    def hardware_problem(self) -> str | None:
        """What this machine cannot run of the current toggles (a launch would be refused)."""
        try:
            return dp_problem(self.values(), self.gpus)
        except ConfigError:
            return None

    def refresh_summary(self) -> None:
        summary = self.query_one("#toggle-summary", Static)
        error = self.query_one("#toggle-error", Static)
        self.query_one("#t-dist-mode").remove_class("-invalid")
        self.query_one("#toggle-speed", Static).display = False  # shown again below when it applies
        for t in TOGGLES:
            if t.kind == "switch":
                on = self.query_one(f"#{t.wid}", Switch).value
                self.query_one(f"#{t.wid}-state", Static).update("on" if on else "off")
        try:
            cfg = self.values()
        except ConfigError as exc:
            summary.update("")
            error.update(f"✗ {exc}")
            error.display = True
            summary.display = False
            self.add_class("-invalid")
            return
        problem = dp_problem(cfg, self.gpus)
        if problem:
            summary.display = False
            error.update(f"✗ {problem}")
            error.display = True
            self.query_one("#t-dist-mode").add_class("-invalid")
            self.add_class("-invalid")
            return
        self.remove_class("-invalid")
        error.update("")
        error.display = False
        summary.display = True
        device_type = self._device_type(cfg)
        precision, speed_line, speed_story = summary_note(cfg, device_type)
        speed = self.query_one("#toggle-speed", Static)
        speed.update(speed_line or "")
        speed.tooltip = speed_story
        speed.display = bool(speed_line)
        words = precision.words
        ws = cfgmod.world_size(cfg)
        par = {"none": "1 process", "dp": "DataParallel", "ddp": f"DDP x{ws}", "fsdp": f"FSDP x{ws}"}[cfg.dist.mode]
        steps = cfg.run.max_steps
        epochs = cfg.run.epochs
        extent = f"{epochs} epoch{'s' if epochs != 1 else ''}" + (f", at most {steps} steps" if steps else "")
        summary.tooltip = speed_story
        summary.update(f"→ {words} · {par} on {device_type} · {extent}")

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
        control = getattr(event, "control", None)
        if control is not None and control.id == PRECISION_ID:
            if control.value != OTHER:  # "other" picked by hand: the rows stay as they are
                self._apply_variant(str(control.value))
        self._sync_precision()  # what the toggles make now (a pick under parallel fsdp is an FSDP policy: "other")
        self.refresh_summary()
        self.post_message(self.Edited())
