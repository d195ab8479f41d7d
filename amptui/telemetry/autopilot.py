"""The precision autopilot's rules (core/autopilot.py) for a run's Recorder: built for the precision the
run computes in and the device it runs on, fed each step record. Shared by amptui's trainer (which acts
under `mode = "act"`, trainer/autopilot.py) and a script's hooks (which only advise: amptui does not own
a script's loop)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from amptui.core import autopilot as rules
from amptui.core.config import autopilot as settings_of
from amptui.core.config.precision import Precision, narrow, wide_dtype
from amptui.core.stream.records import Numerics, PlanSample, Record, Step, WarningRecord
from amptui.telemetry.device import native_bf16

CODE = "autopilot"  # the warning code of what it says: an advice, or a rule held back


class Autopilot:
    def __init__(self, settings: settings_of.Autopilot, precision: Precision, device: torch.device,
                 float8_skip: list[str] | None = None, layers: dict[str, str] | None = None, widened: int = 0,
                 total_steps: int | None = None, fired_before: tuple[str, ...] = ()):
        self.settings, self.precision = settings, precision
        roof, roof_why = None, None
        if layers is not None and settings.promote_after and "promote" in settings.rules and \
                settings.promote_for == settings_of.HERE and "promote" not in fired_before:
            from amptui.machine.roof import measured_roof  # cached rates: measured once per machine

            roof, roof_why = measured_roof(device)
        self.pilot = rules.Pilot(settings, narrow_scaled=precision.autocast and narrow(precision.dtype) and precision.scaler,
                                 wide=wide_dtype(), wide_fast=native_bf16(device), float8_skip=float8_skip,
                                 layers=layers, widened=widened, total_steps=total_steps, roof=roof,
                                 roof_why=roof_why, fired_before=fired_before)
        self.held_back_said = False

    @classmethod
    def of(cls, amp_cfg: Any, precision: Precision, device: torch.device | None,
           trainer: bool = False, widened: int = 0, total_steps: int | None = None,
           fired_before: tuple[str, ...] = ()) -> Autopilot | None:
        """None when [amp.autopilot] is off. `trainer`: amptui's own trainer, whose conversions and
        [amp.layers] the rules may change; `widened`: modules earlier switches widened."""
        settings = settings_of.of(amp_cfg)
        skip = rules.kept_out(amp_cfg) if trainer else None
        layers = dict(getattr(amp_cfg, "layers", {})) if trainer else None
        return cls(settings, precision, device or torch.device("cpu"), skip, layers, widened,
                   total_steps, fired_before) if settings.on else None

    def note(self, record: Record) -> rules.Decision | None:
        """Any other record the run writes: a `numerics` sample feeds rule float8_sqnr, a `warning` naming a
        non-finite step's cause rule widen_overflow."""
        if isinstance(record, Numerics):
            return self.pilot.observe_numerics(record.fields())
        if isinstance(record, PlanSample):
            self.pilot.observe_plan(record.fields())
        return self.pilot.observe_warning(record.fields()) if isinstance(record, WarningRecord) else None

    def said(self) -> str | None:
        """What a rule that fired but was held back says, once."""
        if self.pilot.held_back and not self.held_back_said:
            self.held_back_said = True
            return self.pilot.held_back
        return None

    def observe(self, record: Step | None) -> tuple[rules.Decision | None, str | None]:
        """(a decision, what to say now) after a step record: the decision of a rule that fired (once), and
        the line a rule held back (its target slow here) says, once."""
        if record is None:
            return None, None
        return self.pilot.observe(record.fields()), self.said()

    def advisor(self, warn: Callable[[str, str], None]) -> Advisor:
        """A sink for a run amptui does not own the loop of (a script's hooks): what `act` would do, said as
        warnings through `warn(code, message)`; nothing changed."""
        return Advisor(self, warn)


class Advisor:
    """A Recorder sink (telemetry/sinks.py) that feeds the rules each step record and says each decision."""

    def __init__(self, pilot: Autopilot, warn: Callable[[str, str], None]):
        self.pilot, self.warn = pilot, warn

    def step(self, record: Step) -> None:
        decision, said = self.pilot.observe(record)
        if decision is not None:
            self.warn(CODE, decision.advice(self.pilot.precision.short, own_loop=True))
        if said:
            self.warn(CODE + "_held", said)

    def note(self, record: Record) -> None:
        pass

    def epoch(self, record: Any, step: int) -> None:
        pass

    def close(self) -> None:
        pass


def advisors(amp_cfg: Any, precision: Precision, device: torch.device | None,
             warn: Callable[[str, str], None], rank: int = 0) -> list[Advisor]:
    """[amp.autopilot] for a script's hooks: its Advisor sink, or none when the autopilot is off. Under
    torchrun rank 0 advises (as amptui's trainer, where rank 0 decides): one line, not one a rank."""
    pilot = Autopilot.of(amp_cfg, precision, device) if rank == 0 else None
    return [pilot.advisor(warn)] if pilot is not None else []
