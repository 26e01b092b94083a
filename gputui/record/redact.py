"""Secret values kept out of what gputui writes and prints: recordings, ``presets show``.

A variable whose name looks secret keeps its name (so a reader sees it was set) and
loses its value.  The child still gets the real value: only what gputui shows is redacted.
"""

from __future__ import annotations

from collections.abc import Mapping

REDACTED = "<redacted>"
# Parts of names that mark a secret, matched anywhere in the name, in any case.  Broad
# on purpose (KEYBOARD_LAYOUT is hidden too): hiding a harmless value costs little.
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE")


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def redact_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The variables with secret values replaced, and the names replaced (in order)."""
    hidden = [name for name in env if looks_secret(name)]
    return {name: REDACTED if name in hidden else value for name, value in env.items()}, hidden
