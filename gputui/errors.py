"""Errors a user can fix: the CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input (a presets file, an argument): the message names where and what was expected."""

    exit_code = 2
