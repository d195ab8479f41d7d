"""`amptui keys`: the dashboard's actions by name with their keys, as amptui's config file's
keymap leaves them.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("keys", help="the dashboard's actions by name, with their keys (remap them in "
                       "~/.config/amptui/config.toml [keymap])")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")


def handle(args) -> int:
    """Every remappable dashboard action, its key(s) now (the config file's keymap applied) and the file."""
    from amptui.cli.tables import print_lines, print_table
    from amptui.core import userconfig
    from amptui.dashboard.app import keymap_scopes
    from amptui.dashboard.keymap import check_keymap, key_shown, keys_of, known_actions

    settings = userconfig.load()
    scopes = keymap_scopes()
    keymap = check_keymap(settings.keymap, str(settings.path), scopes) if settings.keymap else {}
    rows = [(name, ",".join(key_shown(k) for k in keys_of(b, keymap)), b.description or b.action)
            for name, b in known_actions(scopes).items()]
    if args.format == "json":
        print(json.dumps({"config_file": str(userconfig.config_file()),
                          "actions": [dict(zip(("action", "keys", "does"), row, strict=True)) for row in rows]}))
        return 0
    print_table(["action", "keys", "does"], rows, no_wrap=["action", "keys"])
    print_lines([f"remap in {userconfig.config_file()}: [keymap] then e.g. \"home.run\" = \"ctrl+r\""])
    return 0
