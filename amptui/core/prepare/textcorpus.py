"""The text behind `data.name = "text"`: which files, read how far, split where. No torch.

`data.path` names a text file or a folder of them; empty means a corpus every machine has without
a download: the `.py` files of Python's own standard library (the folder of the `os` module's
file, without site-packages / dist-packages), a few MB of real text. A folder is read recursively
in sorted path order, skipping hidden entries and files that look binary (a NUL byte in their
first 4 KiB), up to MAX_BYTES in all; a file named on its own is read as it is. The first (1 - VAL_FRACTION) of the bytes train, the rest
validate. The preflight lists the files (cheap); the trainer reads them.
"""

from __future__ import annotations

import os
from pathlib import Path

from amptui.core.errors import UserError

MAX_BYTES = 16 * 2**20  # read at most this much of a corpus (the rest of a big folder is left out)
VAL_FRACTION = 0.1      # the last 10% of the bytes are the validation set
DEFAULT_CORPUS = "Python's standard library"
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def default_folder() -> Path:
    return Path(os.__file__).resolve().parent


def describe(path: str) -> str:
    """The corpus in words, for messages and the docs."""
    return f"{DEFAULT_CORPUS} ({default_folder()})" if not path else path


def _looks_binary(file: Path) -> bool:
    try:
        with open(file, "rb") as fh:
            return b"\0" in fh.read(4096)
    except OSError:
        return True


def _walk(folder: Path, suffix: str) -> list[Path]:
    """Regular files under `folder` (sorted, hidden entries and _SKIP_DIRS pruned) until MAX_BYTES."""
    found, total = [], 0
    for here, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(names):
            file = Path(here) / name
            if name.startswith(".") or (suffix and not name.endswith(suffix)) or not file.is_file():
                continue
            if _looks_binary(file):
                continue
            found.append(file)
            total += file.stat().st_size
            if total >= MAX_BYTES:
                return found
    return found


def corpus_files(path: str) -> list[Path]:
    """The files of `data.path` ("" = the default corpus), or a UserError naming data.path."""
    if not path:
        files = _walk(default_folder(), ".py")
        if not files:
            raise UserError(f"data.path is empty, so amptui looked for {describe(path)} and found no .py files "
                            "there; set data.path to a text file or folder")
        return files
    where = Path(path).expanduser()
    if where.is_file():
        return [where]  # named on purpose: taken as it is (byte-level, any bytes will do)
    if where.is_dir():
        files = _walk(where, "")
        if not files:
            raise UserError(f"data.path = {path!r} is a folder without text files; name a text file or a folder "
                            "of them")
        return files
    raise UserError(f"data.path = {path!r}: no such file or folder; name a text file or folder "
                    "(or leave data.path empty for the built-in corpus, Python's standard library)")


def read_corpus(files: list[Path]) -> bytes:
    """The files' bytes, one after another, at most MAX_BYTES."""
    parts, total = [], 0
    for file in files:
        with open(file, "rb") as fh:
            chunk = fh.read(MAX_BYTES - total)
        parts.append(chunk)
        total += len(chunk)
        if total >= MAX_BYTES:
            break
    return b"".join(parts)


def split(data: bytes, window: int) -> tuple[bytes, bytes]:
    """(train, validation): the last VAL_FRACTION of the bytes validate. Each part must hold at
    least one window of `window` bytes (block_size + 1: inputs and their next bytes)."""
    cut = int(len(data) * (1 - VAL_FRACTION))
    train, val = data[:cut], data[cut:]
    if len(val) < window:
        raise UserError(f"the text corpus holds {len(data)} bytes: too few for a validation window of {window} "
                        f"bytes (model.block_size + 1) in its last {VAL_FRACTION:.0%}; use more text or a smaller "
                        "model.block_size")
    return train, val


def check(path: str, block_size: int) -> None:
    """Preflight: the corpus exists and is big enough (counted from the files' sizes, not read)."""
    files = corpus_files(path)
    size = min(MAX_BYTES, sum(f.stat().st_size for f in files))
    if size * VAL_FRACTION < block_size + 1:
        raise UserError(f"data.path = {describe(path)!r} holds {size} bytes: too few for a validation window of "
                        f"{block_size + 1} bytes in its last {VAL_FRACTION:.0%}; use more text or a smaller "
                        "model.block_size")
