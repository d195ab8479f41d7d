"""`amptui sky PRESET --nodes N --gpus TYPE:COUNT` (or `--script FILE`): print (or write) a
SkyPilot task that runs it under torchrun on N nodes, the runs folder on storage every node
shares (jobs/sky.py writes it; `sky launch` / `sky jobs launch` run it).

Standard library and amptui's core only at import time.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from amptui.cli.parser import PRESET_HELP
from amptui.core.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("sky", help="a SkyPilot task that runs a preset (or --script) under torchrun on N nodes",
                       usage="amptui sky PRESET --nodes N --gpus TYPE:COUNT [-o task.yaml] [--runs-dir DIR | --bucket B]\n"
                             "       amptui sky --script FILE --nodes N --gpus TYPE:COUNT [...] [-- ARGS...]")
    p.add_argument("preset", nargs="?", metavar="PRESET", help=PRESET_HELP)
    p.add_argument("--script", metavar="FILE", help="your own training script instead of a preset: its folder is "
                   "the task's workdir (uploaded); arguments after -- go to the script")
    p.add_argument("--nodes", type=int, default=2, metavar="N", help="nodes (default 2): the task's num_nodes")
    p.add_argument("--gpus", required=True, metavar="TYPE:COUNT",
                   help="accelerators per node as SkyPilot names them (e.g. H100:8), one process each; cpu: CPU "
                        "nodes, one process each")
    p.add_argument("--bucket", metavar="NAME|URL",
                   help="the runs folder: a bucket mounted on every node (a name SkyPilot makes when missing, or "
                        "s3://..., gs://...); default: a bucket of your own, amptui-runs-USER-...")
    p.add_argument("--runs-dir", dest="sky_runs_dir", metavar="DIR",
                   help="the runs folder: a path on the nodes that every node shares (a volume, an NFS mount), "
                        "instead of a bucket")
    p.add_argument("--port", type=int, default=29500, help="the rendezvous port on the first node (default 29500)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the task to FILE instead of printing it")


def handle(args) -> int:
    from amptui.core import safefile
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.jobs import sky, slurm

    if not args.preset and not args.script:
        raise UserError("name a preset (see `amptui presets list`) or a script with --script FILE")
    if args.preset and args.script:
        from amptui.core.config.scriptsets import preset_refusal

        raise UserError(preset_refusal(args.preset, "--script"))
    accelerator, gpus = sky.parse_gpus(args.gpus)
    script = Path(args.script) if args.script else None
    if script is not None and not script.is_file():
        raise UserError(f"--script {args.script}: no such file")
    spec = sky.SkySpec(nodes=args.nodes, accelerator=accelerator, gpus_per_node=gpus, runs_dir=args.sky_runs_dir,
                       bucket=args.bucket, port=args.port, script=script.name if script else None,
                       workdir=script.resolve().parent if script else None, script_args=list(args.script_args or []))
    sky.check_spec(spec)
    overrides = config.parse_set(args.sets)
    if script is not None:
        from amptui.core.config.scriptsets import check_script_sets

        check_script_sets(overrides)
    preset = presets.find_preset(args.preset) if args.preset else None
    cfg = sky.job_config(preset, overrides, spec)
    source = sky.install_source()
    doc = sky.task(cfg, spec, source)
    name = cfg.run.name or (script.name if script is not None else "")
    header = [f"amptui: {name} on {spec.nodes} node(s) x {max(1, gpus)} process(es), torchrun with static "
              "rendezvous from SkyPilot's variables",
              "written by: " + shlex.join(["amptui", *args.argv]),
              "launch with: sky launch THIS_FILE   or, recovering from preemptions: sky jobs launch THIS_FILE",
              "runs folder on the nodes: " + spec.nodes_runs_dir + ("" if spec.runs_dir else f" (bucket {bucket_of(doc)})"),
              "precision: " + (script_precision(cfg) if script is not None else slurm.precision_words(cfg))]
    text = sky.task_yaml(doc, header)
    from amptui.cli.prose import say

    for warning in sky.node_local_warnings(spec) + sky.checkpoint_warnings(cfg):
        say(f"amptui: warning: {warning}", sys.stderr, hang=2)
    if args.output:
        out = Path(args.output)
        try:
            safefile.atomic_write_text(out, text)
        except OSError as exc:
            raise UserError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
        print(f"wrote {out} (launch with: sky launch {shlex.quote(str(out))}, or sky jobs launch "
              f"{shlex.quote(str(out))} to recover from preemptions)")
    else:
        print(text, end="")
    return 0


def script_precision(cfg) -> str:
    """A script's precision in the header: its own loop's, or what amptui applies to it (run.apply_amp)."""
    if cfg.run.apply_amp:
        return f"{cfg.run.apply_amp}, applied by amptui to the script's fp32 loop (run.apply_amp)"
    return "the script's own (its autocast and GradScaler, as its loop enters them; the hooks record it)"


def bucket_of(doc: dict) -> str:
    mount = doc["file_mounts"]["/amptui-runs"]
    return mount.get("name") or mount.get("source")
