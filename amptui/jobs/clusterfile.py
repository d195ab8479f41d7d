"""The one writer of files other systems parse: a SkyPilot task (YAML whose `run` a shell runs)
and a SLURM batch script (bash), each embedding the preset (TOML).

Each reader has its own idea of a line break: YAML also breaks at U+0085, U+2028, U+2029 and
"\\r"; Python's splitlines at \\v, \\f and \\x1c-\\x1e too; a shell at "\\n"; a terminal shows the
rest of the unprintable characters as nothing or a space. So a string bound for a shell word
(`word`) with such a character is refused, one line naming it; a comment (`comment`) shows it
escaped; the preset is TOML with every such character escaped (core config.to_toml); and the
finished text is checked whole (`check_text`: "\\n" the only line break, nothing unprintable) and,
for the embedded preset and the task, parsed back and compared with what was meant before it is
written.
"""

from __future__ import annotations

import json
import re
import shlex

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError


def word(value: str, what: str) -> str:
    """`value` unchanged when a shell and YAML read it as one string; else one refusal naming `what`."""
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise UserError(f"{what} {json.dumps(value)}: holds U+{ord(bad):04X}, a control character or one that a "
                        "task's reader (YAML, a shell) takes as a line break; it cannot go into a cluster file")
    return value


def comment(text: str) -> str:
    """Text for a `# ...` line: unprintable characters (line breaks among them) escaped."""
    return cfgmod.escape_unprintable(text).replace("\n", "\\n")


def check_text(text: str, what: str) -> str:
    """The whole file: "\\n" its only line break and nothing unprintable besides."""
    for number, line in enumerate(text.split("\n"), 1):
        bad = next((c for c in line if not c.isprintable()), None)
        if bad is not None:
            raise UserError(f"{what}: line {number} would hold U+{ord(bad):04X} (a reader may take it as a line "
                            "break); nothing written")
    return text


def check_preset(text: str, heredoc_end: str, meant: dict, what: str) -> None:
    """The preset embedded between `<<'END'` and END reads back as exactly `meant`."""
    match = re.search(rf"<<'{heredoc_end}'\n(.*?)\n{heredoc_end}\n", text, re.S)
    try:
        back = cfgmod.parse_toml(match.group(1), what) if match else None
    except UserError:
        back = None
    if back != meant:
        raise UserError(f"{what}: the embedded preset does not read back as written; nothing written")


def preset_toml(cfg: cfgmod.Config) -> tuple[str, dict]:
    """The preset a cluster file embeds (only what differs from the defaults) and what it must read back as."""
    meant = cfgmod.minimal(cfg.to_dict())
    return cfgmod.to_toml(meant), meant


def check_yaml(text: str, meant: dict, what: str) -> None:
    """The task parsed as SkyPilot parses it (PyYAML, which SkyPilot depends on) equals `meant`.
    Without PyYAML here check_text's guarantee stands alone: no line break but "\\n"."""
    try:
        import yaml
    except ImportError:
        return
    try:
        back = yaml.safe_load(text)
    except yaml.YAMLError:
        back = None
    if back != meant:
        raise UserError(f"{what}: the task does not read back as written (YAML); nothing written")


def yaml_quoted(value: str) -> str:
    """A YAML double-quoted scalar: printable characters as they are, the rest as \\u/\\U escapes
    (JSON's surrogate pairs for characters past U+FFFF are two lone surrogates to PyYAML)."""
    body = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + cfgmod.escape_unprintable(body).replace("\n", "\\n") + '"'


def shell_join(words: list[str], what: str) -> str:
    return shlex.join(word(w, what) for w in words)
