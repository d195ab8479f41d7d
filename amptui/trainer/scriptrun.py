"""`python -m amptui.trainer.scriptrun RUN_DIR SCRIPT [ARGS...]`: a user's script under amptui's
hooks, as `amptui run --script` starts it (one process; under DDP one per rank, from torchrun).

The runner is jobs/scriptrun.py (the script as `__main__`, its end record in every case); the
hooks are telemetry/scripthooks, installed before the script's first line. This layer may import
both.
"""

from __future__ import annotations

import sys

from amptui.jobs import scriptrun
from amptui.telemetry import scripthooks

if __name__ == "__main__":
    scriptrun.main(sys.argv[1:], install_hooks=scripthooks.install)
