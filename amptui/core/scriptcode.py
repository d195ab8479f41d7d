"""What code a script run ran: the script and the .py files it imports from its own folder, each
hashed as the run starts (recorded in the start record as `code`), so `amptui ab --script` and
`compare` can say when two runs ran different programs (a script that edits itself, or a helper
module, between variants) instead of comparing them as if only precision differed.

The imports are found as Python would find them from the script's folder (sys.path[0] for
`python SCRIPT`), by the standard library's `modulefinder`, which reads the files' bytecode and
runs none of them; modules found elsewhere (torch, site-packages) are not the script's code.
"""

from __future__ import annotations

import hashlib
import modulefinder
import os
import stat

SHORT = 12  # hex digits kept per hash: enough to tell versions of one file apart, short to show


def _digest(path: str) -> str | None:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device named *.py is no code to hash
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()[:SHORT]
    except OSError:
        return None


def local_files(script: str) -> list[str]:
    """The script and the files of the modules it imports (directly or through each other) that
    lie in its own folder. Just the script when its imports cannot be read (a syntax error)."""
    script = os.path.abspath(script)
    folder = os.path.dirname(script)
    finder = modulefinder.ModuleFinder(path=[folder])
    try:
        finder.run_script(script)
    except Exception:  # noqa: BLE001 -- whatever the script holds, its own file is still hashed
        return [script]
    found = {os.path.abspath(path) for m in finder.modules.values() if (path := getattr(m, "__file__", None))}
    return sorted(f for f in found | {script} if os.path.commonpath([f, folder]) == folder)


def fingerprint(script: str) -> dict | None:
    """{"sha256": one hash of them all, "files": {path from the script's folder: its hash}}, or
    None when the script cannot be read (a `-m MODULE` run names no file)."""
    if not os.path.isfile(script):
        return None
    folder = os.path.dirname(os.path.abspath(script))
    files = {os.path.relpath(path, folder): digest for path in local_files(script)
             if (digest := _digest(path)) is not None}
    whole = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:SHORT]
    return {"sha256": whole, "files": files}


def changed_files(codes: list[dict]) -> list[str]:
    """The files whose hash differs between the runs' fingerprints (one present in only some of
    them counts); [] when all ran the same code."""
    if len({c.get("sha256") for c in codes}) <= 1:
        return []
    names = sorted({name for c in codes for name in (c.get("files") or {})})
    return [n for n in names if len({(c.get("files") or {}).get(n) for c in codes}) > 1]
