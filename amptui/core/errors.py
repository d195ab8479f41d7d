"""The one exception type a user mistake turns into.

Anything raised as `UserError` is shown as a single line (no traceback) and the command
exits non-zero. Bugs stay ordinary exceptions so they are not hidden.
"""


class UserError(Exception):
    """A mistake in the user's input or environment, explained in one line."""

    exit_code = 2


class ConfigError(UserError):
    """A preset or `--set` value that does not fit the schema."""
