"""A crafted run folder, as a hostile user would hand one over: every string amptui shows from it
(preset name, description, error message, log lines, a saved preset's name) carries a terminal's
escape sequences (an OSC window title, a screen clear, a colour), Rich markup and bidi overrides."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from support.dashboard import FAILED, FIXTURES

OSC_TITLE = "\x1b]2;PWNED-TITLE\x07"     # sets the terminal's (tmux pane's) title
HOSTILE = f"evil{OSC_TITLE}\x1b[2J\x1b[31m[bold red]boom[/]\u202eexe.txt\x9b0m\u2028tail"
# What must never reach a terminal raw: C0 (but \n), DEL, C1, bidi overrides and isolates, line separators.
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of \\uXXXX escapes is a TOML basic string too


def write_crafted_run(root: Path, run_id: str = "20261121-231609-evil-b640", hostile: str = HOSTILE) -> Path:
    """FAILED's records with the hostile text as its preset name, description, error and log lines."""
    run_dir = Path(shutil.copytree(FIXTURES / "runs" / FAILED, Path(root) / run_id))
    config = (run_dir / "config.toml").read_text()
    config = config.replace('name = "quickstart"', f"name = {toml_string(hostile)}", 1)
    config = re.sub(r'description = ".*"', lambda _: f"description = {toml_string(hostile)}", config, count=1)
    (run_dir / "config.toml").write_text(config)
    lines = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "start":
            rec.update(run_id=run_id, preset=hostile)
            rec["config"]["run"].update(name=hostile, description=hostile)
        if rec["kind"] == "end":
            rec["error"]["message"] = hostile
        lines.append(json.dumps(rec))
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    with open(run_dir / "output.log", "a") as fh:
        fh.write(hostile + "\n")
    return run_dir


def write_crafted_preset(config_home: Path) -> Path:
    """A saved preset (a file a team passes around) whose name and description are hostile."""
    folder = Path(config_home) / "amptui" / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "shared.toml"
    path.write_text(f"[run]\nname = {toml_string(HOSTILE)}\ndescription = {toml_string(HOSTILE)}\n"
                    "max_steps = 2\n[model]\nname = \"mlp\"\n[data]\nname = \"random\"\n")
    return path
