"""`amptui stop RUN_ID`: stop a running run gracefully (checkpoint, then status stopped).

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

from amptui.cli.parser import run_id_argument, runs_dir_option


def add_parser(sub) -> None:
    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped)")
    run_id_argument(p, "the run to stop")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    info = launch.stop(run_dir)
    if info.status == "running":
        print(f"run {info.run_id}: stop requested; still finishing its current step (check `amptui runs`)")
        return 1
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1
