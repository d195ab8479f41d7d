"""`--help` text wrapped at spaces only: argparse wraps with textwrap, which also breaks after a
hyphen ("save the winner as PRESET-" / "tuned"), cutting identifiers a user types in two.

AmptuiParser makes this formatter the default of every parser, its subcommands' included (argparse
builds those with the parent's class)."""

from __future__ import annotations

import argparse
import textwrap


class WholeWordsFormatter(argparse.HelpFormatter):
    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


class WholeWordsRawDescription(argparse.RawDescriptionHelpFormatter, WholeWordsFormatter):
    """The top parser's: its description and examples are laid out already; its options wrap whole."""


class AmptuiParser(argparse.ArgumentParser):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("formatter_class", WholeWordsFormatter)
        super().__init__(**kwargs)
