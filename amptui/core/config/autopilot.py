"""`[amp.autopilot]`: the precision autopilot's settings (off by default). A table of keys checked
here against `KEYS` (type, default, meaning), so a preset's mistake names the key like any other.

    [amp.autopilot]
    mode = "act"            # "off" | "advise" (say what act would do) | "act" (switch at a checkpoint)
    scale_floor = 1.0       # rule scale_collapse: the GradScaler's scale below this ...
    floor_steps = 50        # ... for this many optimizer steps, or
    skip_limit = 20         # ... this many skipped steps ...
    skip_window = 100       # ... within this many steps, after the first clean one (calibration is not counted)

Rules (docs/autopilot.md): `scale_collapse`, float16 + GradScaler -> bfloat16 where bfloat16 is fast;
`float8_sqnr`, a float8 linear whose sampled SQNR stays low -> high precision (amp.float8_skip);
`widen_overflow`, a module whose overflow the triage names (`precision_overflow`) -> float32 ([amp.layers]);
`float8_tail`, a float8 run's last `tail_share` of steps in high precision (amp.float8 = "off");
`promote`, after a warm-up the linears `amptui plan` finds safe and gaining -> float8 ([amp.layers]).
No torch here: the rules themselves are core/autopilot.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from amptui.core.errors import ConfigError
from amptui.core.planning.roofline import roof_for

KEY = "amp.autopilot"
MODES = ("off", "advise", "act")
HERE = "here"  # promote_for: the run's own device, from its measured matmul rates (machine/roof.py)
RULES = ("scale_collapse", "float8_sqnr", "widen_overflow", "float8_tail", "promote")  # the rules built so far (issue 54 names five; docs/autopilot.md)


@dataclass(frozen=True)
class Autopilot:
    mode: str = "off"
    rules: tuple[str, ...] = RULES
    # scale_collapse. The defaults are what tests/functional/test_autopilot.py shows: scaler-lab's calibration from 2**32
    # (32 backoffs in a row, then clean steps) and a healthy float16 run never reach them; a float16 run whose
    # forward overflows every step does, 50 steps after its scale fell below 1.
    scale_floor: float = 1.0
    floor_steps: int = 50
    skip_limit: int = 20
    skip_window: int = 100
    # float8_sqnr: a float8 linear back to high precision after `sqnr_alarms` range samples ([numerics] every) whose
    # float8 GEMM output was under `sqnr_db` above its rounding error (core.modes.float8.SQNR_ALARM_DB's 10 dB: healthy
    # float8 layers keep 20-35 dB; plan-lab's outlier linear, whose inputs are rounded away, stays under it)
    sqnr_db: float = 10.0
    sqnr_alarms: int = 3
    # widen_overflow: a module whose non-finite step the triage pins on float16's range computes in float32 from
    # then on ([amp.layers] "module" = "fp32"), at most this many modules a run
    widen_limit: int = 2
    # ... and a run without a GradScaler, whose non-finite step may leave NaN weights, rewinds to its last checkpoint
    # to replay that step on the weights it had, at most this many times a run
    retry_limit: int = 2
    # float8_tail: a float8 run's last share of steps in high precision (0 = off: the share is the run's to choose)
    tail_share: float = 0.0
    # ... or from the lr's decay onset (the first step record whose lr is under the highest before), if earlier
    tail_on_decay: bool = False
    # promote: after this many steps (0 = off) the linears `amptui plan`'s rules find safe and gaining on `promote_for`'s
    # roofline ("here": the run's device, its measured matmul rates), from the run's own plan samples
    # ([numerics] plan_every), move to that float8 recipe ([amp.layers]); once a run
    promote_after: int = 0
    promote_for: str = "H100"

    @property
    def on(self) -> bool:
        return self.mode != "off"

    @property
    def acts(self) -> bool:
        return self.mode == "act"


_DOCS = {
    "mode": "off; advise: say what act would do (a script's run always only advises); act: switch at a checkpoint",
    "rules": f"the rules that may fire, of {', '.join(RULES)}",
    "scale_floor": "scale_collapse: a GradScaler scale below this ...",
    "floor_steps": "... for this many optimizer steps fires the rule",
    "skip_limit": "scale_collapse: this many skipped steps ...",
    "skip_window": "... within this many optimizer steps (after the first clean step) fires the rule",
    "sqnr_db": "float8_sqnr: a float8 linear's sampled GEMM output SQNR (dB) under this ...",
    "sqnr_alarms": "... in this many range samples ([numerics] every) moves it back to high precision",
    "widen_limit": "widen_overflow: at most this many modules widened to float32 in a run",
    "retry_limit": "widen_overflow without a GradScaler: at most this many rewinds to the last checkpoint a run",
    "tail_share": "float8_tail: the last share (0-1) of a float8 run's steps in high precision (0 = off)",
    "tail_on_decay": "float8_tail: also from the lr's decay onset (its first step record under the highest lr so far)",
    "promote_after": "promote: after this many steps (0 = off), the linears plan's rules find safe and gaining go float8",
    "promote_for": "promote: the GPU whose roofline predicts the gain (as `amptui plan --for`), or \"here\": the "
                   "run's device from its measured bfloat16 and float8 matmul rates",
}


def parse(table: object, source: str) -> Autopilot:
    """The table as settings; a ConfigError naming `amp.autopilot.KEY` for an unknown key or a bad value."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: {KEY} must be a table ([amp.autopilot] with mode = \"advise\" or \"act\")")
    default = Autopilot()
    values: dict[str, Any] = {}
    for name, value in table.items():
        where = f"{source}: {KEY}.{name}"
        if name not in _DOCS:
            raise ConfigError(f"{source}: unknown key '{KEY}.{name}' (known: {', '.join(_DOCS)})")
        values[name] = _checked(name, value, getattr(default, name), where)
    settings = Autopilot(**values)
    if settings.on and not settings.rules:  # on, and nothing could ever fire: a mistake, not a choice
        raise ConfigError(f"{source}: {KEY}.rules is empty, so mode = \"{settings.mode}\" has no rule to fire "
                          f"(name some of {', '.join(RULES)}, or set mode = \"off\")")
    return settings


def _checked(name: str, value: Any, default: Any, where: str) -> Any:
    if name == "mode":
        if value not in MODES:
            raise ConfigError(f"{where} must be one of {', '.join(MODES)}; got {value!r}")
        return value
    if name == "rules":
        if not isinstance(value, list) or any(rule not in RULES for rule in value):
            raise ConfigError(f"{where} must be a list of rule names, of {', '.join(RULES)}; got {value!r}")
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if name == "promote_after":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where} must be an integer >= 0, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where} must be an integer >= 1, got {value!r}")
        return value
    if name == "promote_for":
        if value == HERE:
            return value
        try:
            roof_for(str(value)) if isinstance(value, str) else None
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a GPU's name, got {value!r}")
        return value
    if name == "tail_share":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ConfigError(f"{where} must be a number in [0, 1), got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"{where} must be a number > 0, got {value!r}")
    return float(value)


def of(cfg_amp: Any) -> Autopilot:
    """The settings of a checked config's [amp] (its table passed `parse` when the config was built)."""
    return parse(getattr(cfg_amp, "autopilot", {}) or {}, KEY)


def documented() -> dict[str, tuple[Any, str]]:
    """{key: (default, meaning)} for docs and `presets show`."""
    default = Autopilot()
    return {f.name: (getattr(default, f.name), _DOCS[f.name]) for f in fields(Autopilot)}
