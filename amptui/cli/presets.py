"""`amptui presets [list|show|save|delete]`: the built-in and saved presets.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

from amptui.cli.parser import PRESET_HELP
from amptui.core.errors import UserError
from amptui.core.fmt import shown


def add_parser(sub) -> None:
    p = sub.add_parser("presets", help="list, show, save or delete presets")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.add_parser("list", help="built-in and saved presets")
    show = psub.add_parser("show", help="print a preset with every key resolved")
    show.add_argument("name", metavar="NAME", help=PRESET_HELP)
    show.add_argument("--raw", action="store_true", help="print the file as written")
    save = psub.add_parser("save", help="save a preset (with overrides) under a new name")
    save.add_argument("name", metavar="NAME", help="the new preset's name")
    save.add_argument("--from", dest="source", required=True, metavar="PRESET", help="the preset to start from")
    save.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                      help="override a key, e.g. --set amp.dtype=bfloat16 (repeatable)")
    save.add_argument("--force", action="store_true", help="overwrite a saved preset of that name")
    p = psub.add_parser("delete", help="delete a saved preset (built-ins stay)")
    p.add_argument("name", metavar="NAME", help="a saved preset's name (amptui presets list)")


def handle(args) -> int:
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
            text = config.to_toml(cfg.to_dict(), f"# preset {preset.name} ({preset.path}), every key resolved")
            print(shown(text, newlines=True), end="")  # what TOML keeps raw (U+2028, C1) as \\uNNNN: the same TOML
    elif action == "save":
        source = presets.find_preset(args.source)
        cfg = source.config(config.parse_set(args.sets))
        if cfg.run.name == source.name:
            cfg = cfg.with_overrides({"run.name": args.name})
        path = presets.save_preset(args.name, cfg, force=args.force, source=source.name)
        print(f"saved preset {args.name!r} to {path}")
    elif action == "delete":
        return delete(args)
    return 0


def delete(args) -> int:
    from amptui.core.config import presets

    path = presets.delete_preset(args.name)
    print(f"deleted preset {args.name!r} ({path})")
    return 0
