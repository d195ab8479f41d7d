"""A run folder: the names of its files and the one reading of its config (created by runs.create_folder).

The launcher (core/jobs), the trainer, a user's Monitor, the CLI and the dashboard agree on these;
they live in core, the lowest layer, so the trainer never imports the launcher for a name.
Stdlib at import time: what reads or writes a config is imported where it is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.core.config import values as cfgmod

if TYPE_CHECKING:
    from amptui.core.config.values import Config

CONFIG_FILE = "config.toml"        # the run's resolved config, written before the run starts
EVENTS_FILE = "events.jsonl"       # rank 0's event stream (core/stream/events.py); other ranks: events.rank<N>.jsonl
OUTPUT_LOG = "output.log"          # the trainer's stdout and stderr
RUN_JSON = "run.json"              # who launched the run (pid, host, command)
STOP_FILE = "stop-requested"       # `amptui stop` writes it; every rank stops at its next step record
LOCK_FILE = "lock"                 # one writer per run folder (core/run/runlock.py)
CHECKPOINT_DIR = "checkpoints"     # the run's checkpoint folder
CHECKPOINT_FILE = "last.pt"        # the latest checkpoint (torch), inside CHECKPOINT_DIR
CHECKPOINT_INFO = "last.json"      # what a resume check needs to know of it (plain JSON), beside it
RUN_DIR_ENV = "AMPTUI_RUN_DIR"     # tells a user's script (its amptui.Monitor) where its run folder is


@dataclass(frozen=True)
class RunFolder:
    """Where each file of one run lives; `RunFolder(path)` touches nothing on disk."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def events(self) -> Path:
        """Rank 0's event file, the one that speaks for the run (see also events.primary_events_file)."""
        return self.path / EVENTS_FILE

    def rank_events(self, rank: int) -> Path:
        return self.events if rank == 0 else self.path / f"events.rank{rank}.jsonl"

    @property
    def output_log(self) -> Path:
        return self.path / OUTPUT_LOG

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def stop(self) -> Path:
        return self.path / STOP_FILE

    @property
    def lock(self) -> Path:
        return self.path / LOCK_FILE

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINT_DIR

    @property
    def checkpoint(self) -> Path:
        return self.checkpoints / CHECKPOINT_FILE

    @property
    def checkpoint_info(self) -> Path:
        return self.checkpoints / CHECKPOINT_INFO

    def is_run(self) -> bool:
        """A folder is a run once its config.toml is there, whatever it is: one that is a FIFO, a
        device or a link (never opened here; reading it refuses it) makes a `damaged` run, listed
        and deletable, not a folder that vanishes."""
        return os.path.lexists(self.config)

    def load_config(self) -> Config:
        """The run's resolved config: config.toml read as data (bounded, no symlink followed,
        core/safefile.py) and validated; a ConfigError names the file."""
        return cfgmod.build_config(cfgmod.read_toml(self.config), source=str(self.config))
