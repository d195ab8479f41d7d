"""`amptui`: the dashboard, and the commands that work without it.

Only the standard library and amptui's core are imported here; torch and textual load when a
command needs them, so `amptui --help` answers at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amptui.cli import manage as cli_manage
from amptui.cli import numerics as cli_numerics
from amptui.cli import pictures as cli_pictures
from amptui.cli import serve as cli_serve
from amptui.cli import slurm as cli_slurm
from amptui.cli import tune as cli_tune
from amptui.cli.parser import build_parser
from amptui.cli.run_commands import attach, cmd_resume, cmd_run
from amptui.core.errors import UserError
from amptui.core.fmt import shown
from amptui.jobs.detached import announce


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" belongs to the user's script (`amptui run --script x.py -- ARGS`).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser().parse_args(argv)
    args.script_args = script_args
    args.argv = argv  # a --detach start runs this same command line again in the background
    try:
        handler = COMMANDS[args.command or "dashboard"]  # argparse admits only these
        return handler(args) or 0
    except UserError as exc:
        from amptui.cli.prose import error

        error(str(exc))  # wrapped at word boundaries on a terminal
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


# --- commands ------------------------------------------------------------------------------------

def cmd_ab(args) -> int:
    """The CLI's and the dashboard's A/B (jobs/ab.py): here in the terminal, or with --detach as a
    group driven in the background by this same command line (`--group ID`)."""
    from amptui.cli.prose import error, say
    from amptui.cli.tables import print_comparison
    from amptui.core import compare, preflight
    from amptui.core.config import presets
    from amptui.core.config import values as config
    from amptui.core.config import variants as ab
    from amptui.core.config.precision import Precision
    from amptui.core.config.scriptsets import check_no_script
    from amptui.core.run import runs
    from amptui.jobs import ab as abjob
    from amptui.jobs import groups, launch
    from amptui.machine.hardware import emulated_dtype_notice

    root = runs.runs_root(args.runs_dir, writable=True)
    preset = presets.find_preset(args.preset)
    overrides = config.parse_set(args.sets)
    ab.check_overrides(overrides)
    if not args.group:  # the variants are checked before a group exists: a refusal leaves nothing behind
        planned = preset.config(overrides)
        check_no_script("ab", planned.run.script)
        ab.expand(args.variants, preflight.device_type(planned.run.device), planned.dist.mode)
    if args.detach:
        group, pid = abjob.start_detached(root, preset, args.preset, overrides, args.variants, args.argv)
        announce("ab", f"A/B {group.label} of {preset.name} started in the background; its runs are listed "
                       f"in `amptui runs` as they start\noutput: {group.log}",
                 group_id=group.group_id, label=group.label, pid=pid, log=group.log, group=group.path)
        return 0
    group = groups.find(root, args.group) if args.group else \
        abjob.start_here(root, preset, args.preset, overrides, args.variants)
    with group.recording():
        planned = preset.config(overrides)
        device = preflight.device_type(planned.run.device)
        variants = ab.expand(args.variants, device, planned.dist.mode)
        # Check every variant before the first one starts: a bad combination fails now, not halfway.
        for name, variant in variants:
            resolved = launch.resolve_config(preset, {**overrides, **variant})
            precision = Precision.from_config(resolved, resolved.run.device)
            notice = emulated_dtype_notice(resolved.run.device, precision.autocast, precision.dtype)
            if notice:
                say(f"note: variant {name}: {notice}")

        labels = variant_labels([name for name, _ in variants])

        def follow(run_dir: Path, proc, index: int, name: str) -> int:
            return attach(run_dir, proc, False, 0, label=labels[index - 1])

        outcome = abjob.run_variants(group, preset, overrides, variants, root, follow)
    print()
    print_comparison(outcome.run_dirs, args.format)
    if args.format in ("table", "markdown"):
        _print_emulation_notes([compare.summarize(d) for d in outcome.run_dirs])
        say(f"again later: amptui compare {' '.join(d.name for d in outcome.run_dirs)}")
    if outcome.error:
        error(outcome.error)
    return outcome.exit_code


def variant_labels(names: list[str]) -> list[str]:
    """Each A/B run's progress-line label: "[3/4] bf16+reduce " padded to the longest name and a
    space, so what follows ("completed: ...") never runs into the name."""
    width = max((len(name) for name in names), default=0) + 1
    return [f"[{i}/{len(names)}] {name:<{width}}" for i, name in enumerate(names, 1)]


def cmd_compare(args) -> int:
    from amptui.cli.tables import print_comparison
    from amptui.core.run import runs

    root = runs.runs_root(args.runs_dir)
    dirs = [runs.run_dir(root, run_id) for run_id in args.run_ids]
    if getattr(args, "last_ab", False):
        if dirs:
            raise UserError("compare: give run ids or --last-ab, not both")
        from amptui.jobs.groups import newest_group_runs

        dirs = newest_group_runs(root)
    if not dirs:
        raise UserError("compare: name the runs to compare (ids from `amptui runs`, or --last-ab)")
    if args.format == "svg":  # the compare screen, drawn headless
        return cli_pictures.compare_svg(args, root, dirs)
    print_comparison(dirs, args.format)
    if args.format in ("table", "markdown"):
        from amptui.core import compare

        _print_emulation_notes([compare.summarize(d) for d in dirs])
    return 0


def _print_emulation_notes(summaries) -> None:
    """Under the table: which runs autocast to a dtype this CPU only emulates (so slow is expected)."""
    from amptui.cli.console import emulated_notice
    from amptui.cli.prose import say

    emulated = [(s.run_id, emulated_notice(s.start)) for s in summaries]
    emulated = [(run_id, notice) for run_id, notice in emulated if notice]
    if emulated:
        say(f"note: {', '.join(run_id for run_id, _ in emulated)}: {emulated[0][1]}")


def cmd_stop(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import forcestop, launch

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir, writable=True), args.run_id)
    grace = args.grace
    if runs.load_run(run_dir).status == "running":  # never a silent wait (a refusal says its own line)
        print(f"run {run_dir.name}: stop requested; waiting up to {grace:g} s for it to stop "
              "(then its processes are killed)", file=sys.stderr, flush=True)
    info = launch.stop(run_dir, wait_s=grace)
    if info.status == "running":  # no answer: a deadlocked script, or one that ignores the stop
        writer = forcestop.writer_process(run_dir)
        if writer is None:
            print(f"run {info.run_id}: stop requested; no answer after {grace:g} s and its process is not "
                  "on this machine (check `amptui runs`)")
            return 1
        forcestop.end_processes(writer)
        print(f"run {info.run_id}: stopped (killed after {grace:g} s without an answer)")
        return 0
    print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1


def cmd_runs(args) -> int:
    from amptui.cli.tables import print_runs
    from amptui.core.run import runs

    if getattr(args, "action", None) == "delete":
        return cli_manage.cmd_runs_delete(args)
    root = runs.runs_root(args.runs_dir)
    if getattr(args, "all_folders", False):
        return _runs_all_folders(root, args.format)
    found = runs.list_runs(root)
    if args.format == "json":
        print(json.dumps([r.as_json() for r in found], indent=2))
    elif not found:
        from amptui.core.run.folders import others_hint

        hint = others_hint(root)
        print(f"no runs in {root} (start one with `amptui run quickstart`)" + (f"\n{hint}" if hint else ""))
    else:
        print_runs(found)
    return 0


def _runs_all_folders(root, fmt: str) -> int:
    """`amptui runs --all-folders`: this runs folder, then every other one recorded as used."""
    import os

    from amptui.cli.tables import print_runs
    from amptui.core.run import folders, runs

    here = os.path.realpath(root)
    places = [Path(here)] + [f for f in folders.used_folders() if os.path.realpath(f) != here]
    listed = []
    for place in places:
        try:
            found = runs.list_runs(place)
        except UserError:
            continue  # a folder gone unreadable since: the others still list
        listed.append((place, found))
    if fmt == "json":
        print(json.dumps([{**r.as_json(), "runs_dir": str(place)} for place, found in listed for r in found], indent=2))
        return 0
    for i, (place, found) in enumerate(listed):
        print(("\n" if i else "") + f"runs in {place}:" + ("" if found else " none"))
        if found:
            print_runs(found)
    return 0


def cmd_presets(args) -> int:
    from amptui.cli.tables import print_table
    from amptui.core import safefile
    from amptui.core.config import presets
    from amptui.core.config import values as config

    action = args.action or "list"
    if action == "list":
        rows = [(p.name, "built-in" if p.builtin else "saved", p.description) for p in presets.list_presets()]
        print_table(("NAME", "KIND", "DESCRIPTION"), rows, no_wrap=("NAME", "KIND"))
        from amptui.cli.prose import say

        say(f"\nsaved presets live in {presets.saved_dir()}")
    elif action == "show":
        preset = presets.find_preset(args.name)
        if args.raw:
            try:
                text = safefile.read_text(preset.path, config.TOML_LIMIT, follow=True)
            except (OSError, ValueError) as exc:
                raise UserError(f"{preset.path}: cannot read: {exc}") from None
            print(shown(text, newlines=True), end="")
        else:
            cfg = preset.config()
            print(config.to_toml(cfg.to_dict(), f"# preset {preset.name} ({preset.path}), every key resolved"), end="")
    elif action == "save":
        source = presets.find_preset(args.source)
        cfg = source.config(config.parse_set(args.sets))
        if cfg.run.name == source.name:
            cfg = cfg.with_overrides({"run.name": args.name})
        path = presets.save_preset(args.name, cfg, force=args.force, source=source.name)
        print(f"saved preset {args.name!r} to {path}")
    elif action == "delete":
        return cli_manage.cmd_presets_delete(args)
    return 0


def cmd_doctor(args) -> int:
    from amptui.cli.doctor import run_doctor

    return run_doctor(args)


def _need_terminal() -> None:
    if cli_serve.served_by_textual_serve():  # a browser tab of `amptui serve`: its screen is the page
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs an interactive terminal (for scripts: amptui run / runs / compare)")


def _dashboard_settings():
    """amptui's config file, its keymap checked (a bad one: one line, exit 2, before any terminal check)."""
    from amptui.core import userconfig
    from amptui.dashboard.keymap import check_keymap

    settings = userconfig.load()
    if settings.keymap:
        check_keymap(settings.keymap, str(settings.path))
    return settings


def cmd_dashboard(args) -> int:
    from amptui.core.run import runs

    settings = _dashboard_settings()
    _need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), settings=settings).run()
    return 0


def cmd_watch(args) -> int:
    from amptui.core.run import runs

    run_dir = runs.run_dir(runs.runs_root(args.runs_dir), args.run_id)  # a bad id: one line, exit 2
    if args.svg:  # the run screen, drawn headless
        return cli_pictures.watch_svg(args, run_dir)
    settings = _dashboard_settings()
    _need_terminal()
    from amptui.dashboard.app import make_app

    make_app(runs.runs_root(args.runs_dir), watch=run_dir, settings=settings).run()
    return 0


def cmd_keys(args) -> int:
    """Every remappable dashboard action, its key(s) now (the config file's keymap applied) and the file."""
    from amptui.cli.tables import print_lines, print_table
    from amptui.core import userconfig
    from amptui.dashboard.keymap import check_keymap, key_shown, keys_of, known_actions

    settings = userconfig.load()
    keymap = check_keymap(settings.keymap, str(settings.path)) if settings.keymap else {}
    rows = [(name, ",".join(key_shown(k) for k in keys_of(b, keymap)), b.description or b.action) for name, b in known_actions().items()]
    if args.format == "json":
        print(json.dumps({"config_file": str(userconfig.config_file()),
                          "actions": [dict(zip(("action", "keys", "does"), row, strict=True)) for row in rows]}))
        return 0
    print_table(["action", "keys", "does"], rows, no_wrap=["action", "keys"])
    print_lines([f"remap in {userconfig.config_file()}: [keymap] then e.g. \"home.run\" = \"ctrl+r\""])
    return 0


COMMANDS = {"run": cmd_run, "resume": cmd_resume, "stop": cmd_stop, "runs": cmd_runs, "presets": cmd_presets,
            "doctor": cmd_doctor, "ab": cmd_ab, "compare": cmd_compare, "dashboard": cmd_dashboard, "watch": cmd_watch,
            "keys": cmd_keys}
COMMANDS["tune"] = cli_tune.cmd_tune
COMMANDS["export"] = cli_manage.cmd_export
COMMANDS["serve"] = cli_serve.cmd_serve
COMMANDS["slurm"] = cli_slurm.cmd_slurm
COMMANDS["numerics"] = cli_numerics.cmd_numerics
