"""Whether `python -m MODULE`, started from the current folder, would find MODULE: asked before
`amptui run -m MODULE` makes a run folder, so a typo is one line and nothing on disk.

Found as Python's import system finds it, without importing anything: the top-level name through
`importlib.util.find_spec` (the current folder first, as `python -m` puts it), each dotted part
through the path finder on its parent package's folders, so no package's `__init__` runs here.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _top_level(name: str, cwd: str):
    saved = sys.path[:]
    sys.path[:] = [cwd, *(p for p in sys.path if p not in ("", cwd))]
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path[:] = saved


def module_missing(module: str, cwd: str | None = None) -> str | None:
    """Why `python -m module` from `cwd` (default: here) would not start, or None when it would."""
    where = cwd or os.getcwd()
    parts = module.split(".")
    spec = _top_level(parts[0], where)
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if spec is None:
            return f"no module named {name!r} (looked in the current folder {where} and on Python's path)"
        if depth == len(parts):
            break
        locations = spec.submodule_search_locations
        if locations is None:
            return f"{name!r} is a module, not a package, so it holds no {parts[depth]!r}"
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth + 1]), list(locations))
    if spec.submodule_search_locations is not None:  # a package runs as its __main__
        main = importlib.machinery.PathFinder.find_spec(f"{module}.__main__", list(spec.submodule_search_locations))
        if main is None:
            return f"{module!r} is a package without a __main__.py, so python -m cannot run it; name its training module"
    return None
