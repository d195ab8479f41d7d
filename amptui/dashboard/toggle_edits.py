"""The home screen's toggle edits, kept per preset across restarts: what the user left in the
toggles of a preset comes back when the dashboard opens again (until they put it back as the
preset has it, or the preset goes). Stored in amptui's state directory (core/statedir.py) as
toggle-edits.json, {"format": 1, "presets": {name: {dotted key: value as the widget held it}}};
bounded, and a damaged file counts as no edits."""

from __future__ import annotations

from typing import Any

from amptui.core import statedir

FORMAT = 1
NAME = "toggle-edits.json"
MAX_PRESETS = 100
_MAX_BYTES = 256 * 1024
_SCALARS = (bool, int, float, str)


def _presets(data: Any) -> dict[str, dict[str, Any]]:
    presets = data.get("presets") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(presets, dict):
        return {}
    return {name: {k: v for k, v in state.items() if isinstance(k, str) and isinstance(v, _SCALARS)}
            for name, state in presets.items() if isinstance(name, str) and isinstance(state, dict)}


def load(known: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """{preset name: toggles as left}; only the presets in `known`, when given."""
    presets = _presets(statedir.read_json(NAME, _MAX_BYTES))
    return {n: s for n, s in presets.items() if known is None or n in known}


def remember(preset: str, state: dict[str, Any] | None) -> None:
    """Keep `state` as the edits of `preset` (None: it is as the preset has it; forget them)."""
    def change(data: Any) -> dict[str, Any]:
        presets = _presets(data)
        presets.pop(preset, None)
        if state:
            presets[preset] = {k: v for k, v in state.items() if isinstance(v, _SCALARS)}
        kept = dict(list(presets.items())[-MAX_PRESETS:])   # the most recently edited last
        return {"format": FORMAT, "presets": kept}

    statedir.update_json(NAME, change)
