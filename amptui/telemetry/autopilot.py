"""The precision autopilot's rules (core/autopilot.py) for a run's Recorder: built for the precision the
run computes in and the device it runs on, fed each step record. Shared by amptui's trainer (which acts
under `mode = "act"`, trainer/autopilot.py) and a script's hooks (which only advise: amptui does not own
a script's loop)."""

from __future__ import annotations

from typing import Any

import torch

from amptui.core import autopilot as rules
from amptui.core.config import autopilot as settings_of
from amptui.core.config.precision import Precision, narrow, wide_dtype
from amptui.core.records import Step
from amptui.telemetry.device import native_bf16

CODE = "autopilot"  # the warning code of what it says: an advice, or a rule held back


class Autopilot:
    def __init__(self, settings: settings_of.Autopilot, precision: Precision, device: torch.device):
        self.settings, self.precision = settings, precision
        self.pilot = rules.Pilot(settings, narrow_scaled=precision.autocast and narrow(precision.dtype) and precision.scaler,
                                 wide=wide_dtype(), wide_fast=native_bf16(device))
        self.held_back_said = False

    @classmethod
    def of(cls, amp_cfg: Any, precision: Precision, device: torch.device | None) -> Autopilot | None:
        """None when [amp.autopilot] is off."""
        settings = settings_of.of(amp_cfg)
        return cls(settings, precision, device or torch.device("cpu")) if settings.on else None

    def observe(self, record: Step | None) -> tuple[rules.Decision | None, str | None]:
        """(a decision, what to say now) after a step record: the decision of a rule that fired (once), and
        the line a rule held back (its target slow here) says, once."""
        if record is None:
            return None, None
        decision = self.pilot.observe(record.fields())
        said = None
        if self.pilot.held_back and not self.held_back_said:
            self.held_back_said, said = True, self.pilot.held_back
        return decision, said
