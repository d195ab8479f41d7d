"""`StderrTail`: stderr passed through unchanged, its last few thousand characters kept, so a
failure a program only printed (argparse's "error: unrecognized arguments: --bogus", then
SystemExit 2) can reach the run's end record in its own words. Used around torchrun (the DDP
supervisor) and around a user's script (trainer/scriptrun.py)."""

from __future__ import annotations

import io

KEEP = 4000  # characters of the tail kept


class StderrTail(io.TextIOBase):
    """Passes writes through to `out` and keeps the last KEEP characters written."""

    def __init__(self, out):
        self.out = out
        self.tail = ""

    def write(self, text: str) -> int:
        self.tail = (self.tail + text)[-KEEP:]
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def fileno(self) -> int:  # a fault handler (torchrun's, the script's) writes to the real file
        return self.out.fileno()

    def isatty(self) -> bool:
        return self.out.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):  # type: ignore[override]  # the wrapped stream's
        return getattr(self.out, "encoding", "utf-8")

    @property
    def errors(self):  # type: ignore[override]
        return getattr(self.out, "errors", "strict")

    def __getattr__(self, name: str):  # anything else a program asks of stderr (buffer, reconfigure, ...)
        return getattr(self.out, name)

    def text(self) -> str:
        return self.tail

    def last_lines(self, n: int = 2, skip_prefix: str = "[amptui]") -> list[str]:
        """The last `n` non-blank lines written, leaving out amptui's own (`skip_prefix`)."""
        # a progress bar redraws its line with \r: only what a line ended with is its text
        lines = [line.rsplit("\r", 1)[-1].strip() for line in self.tail.split("\n")]
        return [line for line in lines if line and not line.startswith(skip_prefix)][-n:]
