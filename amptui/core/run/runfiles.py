"""Names of the files in a run folder that more than one layer reads or writes.

The launcher (core), the trainer and a user's Monitor agree on these; they live in core, the
lowest layer, so the trainer never imports the launcher for a name.
"""

from __future__ import annotations

CONFIG_FILE = "config.toml"        # the run's resolved config, written before the run starts
OUTPUT_LOG = "output.log"          # the trainer's stdout and stderr
STOP_FILE = "stop-requested"       # `amptui stop` writes it; every rank stops at its next step record
CHECKPOINT_DIR = "checkpoints"     # the run's checkpoint folder
CHECKPOINT_FILE = "last.pt"        # the latest checkpoint (torch), inside CHECKPOINT_DIR
CHECKPOINT_INFO = "last.json"      # what a resume check needs to know of it (plain JSON), beside it
RUN_DIR_ENV = "AMPTUI_RUN_DIR"     # tells a user's script (its amptui.Monitor) where its run folder is
