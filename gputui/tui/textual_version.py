"""Which Textual is installed, for the modules that lean on its internals
(gputui.tui.compositor, gputui.tui.quiet_input): each applies only on the versions
it was checked against, and anywhere else leaves Textual's own behaviour in place."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

TESTED_TEXTUAL = ("8.2.",)  # version prefixes whose internals were checked


@cache
def textual_version() -> str:
    try:
        return version("textual")
    except PackageNotFoundError:  # a Textual without package metadata: unknown, so untested
        return ""


def textual_is_tested() -> bool:
    return textual_version().startswith(TESTED_TEXTUAL)
