"""Cheap "did it change?" stamps for files other processes write, read on the home screen's
refresh timer: a few stat calls, and nothing is re-read or redrawn while the stamp stays the same."""

from __future__ import annotations

from amptui.core.config import presets as presetmod

PresetsStamp = tuple[tuple[str, int, int], ...]


def presets_stamp() -> PresetsStamp:
    """(name, mtime_ns, size) of each saved preset file: changes when another process saves,
    replaces (an atomic rename) or deletes one. Built-ins ship with amptui and do not change."""
    directory = presetmod.saved_dir()
    out = []
    try:
        for path in directory.glob("*.toml"):
            try:
                st = path.stat()
            except OSError:  # deleted between the listing and the stat: the next look sees it gone
                continue
            out.append((path.name, st.st_mtime_ns, st.st_size))
    except OSError:
        return ()
    return tuple(sorted(out))
