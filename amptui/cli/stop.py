"""`amptui stop RUN_ID`: stop a running run gracefully (checkpoint, then status stopped), or a whole A/B.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

from amptui.cli.parser import run_id_argument, runs_dir_option


def add_parser(sub) -> None:
    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped), or a "
                                    "whole A/B by its group id or label (ab2): no further variant starts")
    run_id_argument(p, "the run to stop (or an A/B's group id or label)")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import groups, launch

    root = runs.runs_root(args.runs_dir, writable=True)
    group = next((g for g in groups.groups(root) if args.run_id in (g.group_id, g.label)), None)
    if group is not None:  # a whole A/B: no further variant starts, the running one stops
        stopping = groups.cancel(root, group)
        print(f"A/B {group.label} of {group.preset}: cancelled; no further variant starts"
              + (f"; {', '.join(stopping)} is stopping (checkpoint first)" if stopping else ""))
        return 0
    run_dir = runs.run_dir(root, args.run_id)
    info = launch.stop(run_dir)
    if info.status == "running":
        print(f"run {info.run_id}: stop requested; still finishing its current step (check `amptui runs`)")
        return 1
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1
