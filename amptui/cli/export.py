"""`amptui export RUN_ID`: a run's step series as csv or json, on standard output or written whole
to a file outside the run folder.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import sys
from pathlib import Path

from amptui.cli.parser import runs_dir_option
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="a run's step series (loss, lr, loss scale, speed, memory, eval) "
                                      "as csv or json")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to export; an id as `amptui runs` lists it")
    p.add_argument("--format", choices=("csv", "json"), default="csv", help="csv (default) or json")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: standard output)")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core import export
    from amptui.core.run import runs
    from amptui.core.safefile import atomic_writer

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)
    if not args.output:
        export.write(run_dir, args.format, sys.stdout)
        return 0
    out = Path(args.output).expanduser()
    if out.is_dir() or not out.parent.is_dir():
        raise UserError(f"-o {args.output}: not a file in an existing folder")
    if out.parent.resolve() == run_dir.resolve() or run_dir.resolve() in out.parent.resolve().parents:
        raise UserError(f"-o {args.output}: inside the run folder {run_dir.name}; write the export elsewhere "
                        "(the run's own files are not replaced)")
    try:
        with atomic_writer(out, binary=False) as fh:  # whole or not at all
            rows = export.write(run_dir, args.format, fh)
    except OSError as exc:
        raise UserError(f"-o {args.output}: cannot write: {exc.strerror or exc}") from None
    print(f"wrote {rows} steps of {run_dir.name} to {out}", file=sys.stderr)
    return 0
