"""`ab --script` where a variant fails or trains nothing (issue 51 item 10): the failed variant's
recorded error is printed with its name, its row shows no figures, and an A/B in which nothing trained
exits non-zero saying so. Real processes, a tiny loop."""

from __future__ import annotations


def test_ab_help_says_what_estimate_does_for_a_script(cli):
    """Issue 51 item 11: `--help` promised "one step of each variant timed" while a script's estimate is
    "none": the help now says a script's estimate times nothing (it runs none of the user's code)."""
    said = " ".join(cli("ab", "--help", env={"COLUMNS": "100"}).stdout.split())
    assert "With --script it times nothing and says so" in said and 'prints "estimate: none (...)"' in said
