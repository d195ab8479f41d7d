"""The run list's reader: `core.runs.list_runs`, cheap enough for a refresh every few seconds."""

from __future__ import annotations

from pathlib import Path

from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runs import RunInfo, load_run
from amptui.core.stream.eventends import SessionIndex


class RunsCache:
    """`core.runs.list_runs` for a refresh every few seconds: a finished run whose files have not
    changed is not read again, so hundreds of big runs cost a few stat calls."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple, RunInfo]] = {}  # the runs of the last scan only
        self._sessions = SessionIndex()  # what was read of big event files (bounded)

    @staticmethod
    def _stamp(path: Path) -> tuple:
        stamp: list[tuple[int, int] | None] = []
        run = RunFolder(path)
        for file in (run.events, run.run_json, run.config):
            try:
                st = file.stat()
                stamp.append((st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                stamp.append(None)
        return tuple(stamp)

    def scan(self, root: Path) -> list[RunInfo]:
        if not root.is_dir():
            return []
        found: dict[str, tuple[tuple, RunInfo]] = {}
        for path in root.iterdir():
            if not RunFolder(path).is_run():
                continue
            stamp = self._stamp(path)
            known = self._known.get(path.name)
            if known and known[0] == stamp and known[1].status in ("completed", "failed", "stopped"):
                found[path.name] = known
            else:
                found[path.name] = (stamp, load_run(path, sessions=self._sessions))
        self._known = found
        runs = [info for _, info in found.values()]
        runs.sort(key=lambda r: (r.started or 0, r.run_id), reverse=True)
        return runs
