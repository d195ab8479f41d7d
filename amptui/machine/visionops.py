"""Whether torchvision's compiled ops load with this torch (`amptui doctor`). A torchvision built for
another torch (a CUDA build's next to a `+cpu` torch, or another release) installs without
complaint and then fails on import with `operator torchvision::nms does not exist`: every image
preset fails. Checked by importing it and running one compiled op on two boxes, in this process
(doctor's own: a failed import leaves nothing behind that matters)."""

from __future__ import annotations

from typing import Any

from amptui.machine.cputorch import CPU_WHEELS

CUDA_PAIR = "pip install --force-reinstall torch torchvision"


def fix_line(cuda_build: str | None) -> str:
    """The line that installs a matching pair: both from one index, the installed ones replaced."""
    return CUDA_PAIR if cuda_build else CPU_WHEELS


def state() -> dict[str, Any]:
    """{installed, version, ok, error}: torchvision as this torch sees it."""
    from importlib import metadata

    try:
        version: str | None = metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        version = None
    try:
        import torch
        import torchvision
        import torchvision.ops

        boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
        torchvision.ops.nms(boxes, torch.tensor([1.0, 0.5]), 0.5)  # a compiled op: the C extension loaded
    except ModuleNotFoundError as exc:
        if exc.name == "torchvision" or version is None:
            return {"installed": False, "version": None, "ok": None, "error": None}
        return {"installed": True, "version": version, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 -- whatever a mismatched build raises is the finding
        return {"installed": True, "version": version, "ok": False,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]}
    return {"installed": True, "version": version or getattr(torchvision, "__version__", None), "ok": True, "error": None}


def words(found: dict[str, Any], torch_version: str, cuda_build: str | None) -> str:
    """doctor's line about it."""
    if not found.get("installed"):
        return "torchvision: not installed (the image presets need it: " + fix_line(cuda_build) + ")"
    if found.get("ok"):
        return f"torchvision {found.get('version')}: its compiled ops load with this torch"
    return (f"torchvision {found.get('version')} does not work with torch {torch_version} ({found.get('error')}): "
            f"every image preset fails; install a matching pair: {fix_line(cuda_build)}")
