"""`[amp.layers]`: per-module precision. A table of module-name patterns (fnmatch on the qualified
name `model.named_modules()` gives, e.g. "blocks.*.mlp.fc") to a layer variant ("fp32", "bf16",
"fp8-rowwise", ...); the first pattern that matches a module wins, and a module no pattern matches
runs as its parent does (the model itself: the run's precision). No torch here: the trainer applies
it (trainer/layers.py), this module checks the table and says a mixed run in words.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from amptui.core.config.precision import layer_variants as layer_variants  # re-exported: the table's choices
from amptui.core.errors import ConfigError

KEY = "amp.layers"
MAX_RULES = 512      # a plan names each linear once; a model with more is ruled by patterns ("blocks.*")
MAX_PATTERN = 256    # characters: a module's qualified name is far shorter
Rules = tuple[tuple[str, str], ...]  # (pattern, variant), in the table's order



def check_rules(table: object, source: str) -> Rules:
    """The table as rules; a ConfigError naming the key for a bad pattern or an unknown variant."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: {KEY} must be a table of \"module-name pattern\" = \"variant\"")
    if len(table) > MAX_RULES:  # refused before any is looked at: a huge table is an error at once
        raise ConfigError(f"{source}: {KEY} has {len(table):,} rules, more than {MAX_RULES}; rule many modules "
                          "with one pattern (fnmatch: \"blocks.*.mlp.fc\")")
    known = layer_variants()
    rules = []
    for pattern, variant in table.items():
        where = f"{source}: {KEY}.{_quoted(pattern)}"
        why = _bad_pattern(pattern)
        if why:
            raise ConfigError(f"{where}: {why}")
        if not isinstance(variant, str) or variant not in known:
            raise ConfigError(f"{where} = {variant!r}: a layer's precision is one of {', '.join(known)}")
        rules.append((pattern, variant))
    return tuple(rules)


def _quoted(pattern: object) -> str:
    text = str(pattern)
    if len(text) > 40:  # a message names it, never repeats all of it
        text = text[:37] + "..."
    return text if text.replace("_", "").isalnum() else '"' + text.encode("unicode_escape").decode() + '"'


def _bad_pattern(pattern: str) -> str | None:
    if not pattern:
        return "an empty pattern matches no module (\"*\" matches every one)"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern of {len(pattern):,} characters; at most {MAX_PATTERN} (a module name is far shorter)"
    if not pattern.isprintable() or any(c.isspace() for c in pattern):
        return "a module name has no spaces or control characters"
    if pattern.count("[") != pattern.count("]"):
        return "an unclosed [ ] in the pattern (fnmatch: [abc] is one of a, b, c)"
    return None


def rule_for(name: str, rules: Rules) -> str | None:
    """The variant of the first pattern matching module `name`; None: no rule names it."""
    return next((variant for pattern, variant in rules if fnmatch.fnmatchcase(name, pattern)), None)


def unmatched(names: Iterable[str], rules: Rules) -> list[str]:
    """The patterns that match none of `names` (a typo leaves its layers in the run's precision)."""
    names = list(names)
    return [pattern for pattern, _ in rules if not fnmatch.filter(names, pattern)]


def named(patterns: list[str], most: int = 3) -> str:
    """The first `most` patterns quoted, then how many more: a message stays one short line."""
    listed = ", ".join(repr(p if len(p) <= 40 else p[:37] + "...") for p in patterns[:most])
    return listed + (f" and {len(patterns) - most} more" if len(patterns) > most else "")
