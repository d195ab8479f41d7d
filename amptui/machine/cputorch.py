"""A CUDA build of torch on a machine with no CUDA GPU: PyPI's Linux torch wheel brings gigabytes
of CUDA libraries (the nvidia-* packages) that such a machine never uses. `amptui doctor` and the
first run on such a machine say that a CPU-only torch is smaller, and the line that installs it."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from amptui.core import statedir
from amptui.core.prepare.preflight import GPU_DRIVER_PATHS

CPU_WHEELS = "pip install --force-reinstall torch torchvision --index-url https://download.pytorch.org/whl/cpu"
SAID = "cpu-torch-note.json"  # in the state directory: the first run says it, later ones do not
CUDA_LINE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([0-9.]+)['\"]", re.M)  # torch/version.py's `cuda = '13.0'`


def note_words(cuda_build: str | None, cuda_available: bool) -> str | None:
    """The note for a torch built with CUDA `cuda_build` (None: a CPU build), or None: nothing to say."""
    if not cuda_build or cuda_available:
        return None
    return (f"this torch is a CUDA {cuda_build} build and this machine has no usable CUDA GPU: its CUDA "
            f"libraries (several GB) go unused; a CPU-only torch is smaller and trains the same here: {CPU_WHEELS}")


def installed_cuda_build() -> str | None:
    """The CUDA version the installed torch was built with, read from its version.py without
    importing torch (a run's start stays quick); None for a CPU build or where it cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return None
        text = (Path(spec.origin).parent / "version.py").read_text(errors="replace")[:20000]
    except (OSError, ValueError, ImportError):
        return None
    found = CUDA_LINE.search(text)
    return found.group(1) if found else None


def first_run_note() -> str | None:
    """The note, the first time a run on this machine asks (remembered in the state directory).
    A machine with no GPU driver has no usable CUDA GPU (core/prepare/preflight.py's device_type)."""
    if statedir.read_json(SAID, 4096) or any(os.path.exists(p) for p in GPU_DRIVER_PATHS):
        return None
    note = note_words(installed_cuda_build(), cuda_available=False)
    statedir.update_json(SAID, lambda _: {"said": True})
    return note
