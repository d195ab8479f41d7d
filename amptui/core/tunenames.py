"""How `amptui tune` names its trials, and how to read a trial's name back: every trial of one
tune is a run named '<preset>-tune-<4 hex>-<k>' (k counts up), so the run list shows them together
and `compare` knows they were all made from <preset>."""

from __future__ import annotations

import re

_TRIAL = re.compile(r"^(?P<preset>.+)-tune-[0-9a-f]{4}-[0-9]+$")


def trial_name(preset_name: str, tune_hex: str, k: int) -> str:
    return f"{preset_name}-tune-{tune_hex}-{k}"


def source_preset(name: str) -> str:
    """The preset a run was made from: a tune trial's is the tuned preset; any other run's, its name."""
    match = _TRIAL.match(name or "")
    return match.group("preset") if match else name


def is_trial(name: str) -> bool:
    """A tune's trial: its steps are the tune's to give (`run.epochs` only a bound), and it is not
    resumed by itself."""
    return bool(_TRIAL.match(name or ""))
