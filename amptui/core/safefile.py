"""Open what a runs folder or a preset holds as what it must be: data, never a door.

A run folder can be copied from anywhere, and amptui often runs as root, so every file amptui
opens inside a runs folder (or a preset it did not write) goes through here:
- no symlink is followed (`O_NOFOLLOW` on the file; with `within=`, no parent outside that folder);
- only regular files (a FIFO or a device is refused after a non-blocking open, so nothing hangs);
- reads are bounded (a size cap; never read_bytes of something unbounded);
- parsed data is bounded in nesting (deep `[[[[` is a parse error, never a RecursionError);
- files are created with the umask's mode, and replaced atomically.

Every refusal is an `UnsafeFile`, an OSError, so code that already treats an unreadable file as
"damaged" or "missing" keeps doing so.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

MAX_DEPTH = 32               # nesting of parsed TOML/JSON: presets and records need 3-4


class UnsafeFile(OSError):
    """Not opened: a symlink, not a regular file, outside its folder, or over its size cap."""


def umask_mode(base: int = 0o666) -> int:
    """`base` less this process's umask (what `open()` would give a new file)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return base & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no /proc: read it by setting it (and put it straight back)
    os.umask(old)
    return base & ~old


def _check_within(path: Path, within: Path | str | None) -> None:
    if within is None:
        return
    root = os.path.realpath(within)
    parent = os.path.realpath(path.parent)
    if parent != root and not parent.startswith(root.rstrip(os.sep) + os.sep):
        raise UnsafeFile(f"{path}: outside {within}")


def open_fd(path: Path | str, flags: int = os.O_RDONLY, *, within: Path | str | None = None,
            mode: int = 0o666, follow: bool = False) -> int:
    """os.open that follows no symlink, never blocks on a FIFO, and yields a regular file only.

    `flags` are the access and creation flags (O_RDONLY, O_RDWR|O_CREAT, O_WRONLY|O_APPEND...).
    `follow`: a symlink the user made themselves is fine (a preset they named): follow it, and
    still refuse what it points to unless it is a regular file."""
    path = Path(path)
    _check_within(path, within)
    nofollow = 0 if follow else os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # ELOOP: the last component is a symlink
            raise UnsafeFile(f"{path}: is a symbolic link") from None
        if exc.errno == errno.ENXIO:  # ENXIO: a FIFO with no writer, opened for writing
            raise UnsafeFile(f"{path}: not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path}: not a regular file")
        if flags & (os.O_WRONLY | os.O_RDWR) and info.st_nlink > 1:  # a hard link: writing would change its twin
            raise UnsafeFile(f"{path}: has other hard links")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path | str, mode: str = "rb", *, within: Path | str | None = None,
              encoding: str | None = None, follow: bool = False) -> IO[Any]:
    """`open()` with open_fd's checks. Modes: r, rb, a, ab, a+ (created if missing), r+b, and
    x, xb: a new file (O_EXCL: FileExistsError when anything, a link included, has its name)."""
    flags = {"r": os.O_RDONLY, "rb": os.O_RDONLY, "r+b": os.O_RDWR,
             "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "xb": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
             "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
             "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
             "a+": os.O_RDWR | os.O_APPEND | os.O_CREAT}[mode]
    fd = open_fd(path, flags, within=within, follow=follow, mode=umask_mode() if "x" in mode else 0o666)
    if "b" in mode:
        return os.fdopen(fd, mode.replace("x", "w"))
    return os.fdopen(fd, mode.replace("x", "w"), encoding=encoding or "utf-8", errors="replace" if mode == "r" else None)


def check_regular(path: Path | str, *, missing_ok: bool = True) -> None:
    """UnsafeFile unless `path` is a regular file (not followed if a symlink), or absent and
    `missing_ok`: what a command checks before it starts a process that will write `path`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFile(f"{path}: is a symbolic link")
    if stat.S_ISDIR(info.st_mode):
        raise UnsafeFile(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFile(f"{path}: not a regular file")


def read_bytes(path: Path | str, limit: int, *, within: Path | str | None = None,
               follow: bool = False) -> bytes:
    """The whole file, refused (UnsafeFile) when it is larger than `limit` bytes."""
    with open_file(path, "rb", within=within, follow=follow) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{path}: larger than {limit:,} bytes")
    return data


def read_tail(path: Path | str, limit: int, *, within: Path | str | None = None) -> bytes:
    """The last `limit` bytes of the file (a log read for its last lines, however long it grew)."""
    with open_file(path, "rb", within=within) as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - limit))
        return fh.read(limit)


def read_text(path: Path | str, limit: int, *, within: Path | str | None = None,
              follow: bool = False) -> str:
    """read_bytes decoded as UTF-8 (a bad byte is a UnicodeDecodeError, a ValueError)."""
    return read_bytes(path, limit, within=within, follow=follow).decode("utf-8")


def text_or_none(path: Path | str, limit: int) -> str | None:
    """read_text, or None when the file is missing, unsafe, too large or not UTF-8."""
    try:
        return read_text(path, limit)
    except (OSError, ValueError):
        return None


def check_depth(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """`value` itself, or ValueError when its lists/dicts nest deeper than `max_depth`."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= max_depth:
                raise ValueError(f"nested deeper than {max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def loads_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads with bounded nesting: every failure is a ValueError (no RecursionError)."""
    try:
        return check_depth(json.loads(text), max_depth)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None


def load_json(path: Path | str, limit: int, *, within: Path | str | None = None) -> Any:
    """A bounded JSON file: UnsafeFile/OSError when it cannot be opened, ValueError when bad."""
    return loads_json(read_bytes(path, limit, within=within))


@contextlib.contextmanager
def atomic_writer(path: Path | str, binary: bool = True) -> Iterator[IO[Any]]:
    """Write `path` whole or not at all: a temp file beside it, fsynced, renamed over it.

    The new file gets the umask's mode (mkstemp's 0600 would differ from its neighbours)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash once the folder is synced
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write_text(path: Path | str, text: str) -> None:
    """atomic_writer for a whole text (UTF-8)."""
    with atomic_writer(path, binary=False) as fh:
        fh.write(text)
