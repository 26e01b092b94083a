"""Every test runs as a user with no files of their own: the folders gputui (and the
libraries it runs) read for a user's config, data, state and caches point under the
test's own tmp_path, and no ``GPUTUI_*`` setting of the real environment leaks in.
tests/conftest.py applies it to every test; :func:`user_folders` gives the same folders
to a child process's environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The names under tmp_path are the ones the tests already use: a test that plants a
# user presets file writes tmp_path / "xdg" / "gputui" / "presets.toml".
USER_FOLDERS = {
    "HOME": "home",  # Path.home(): ~/.config, ~/.local/state and ~/.cache when an XDG variable is unset
    "XDG_CONFIG_HOME": "xdg",
    "XDG_DATA_HOME": "xdg-data",
    "XDG_STATE_HOME": "state",  # the run history
    "XDG_CACHE_HOME": "xdg-cache",  # generated data sets
}
SETTINGS_PREFIX = "GPUTUI_"


def user_folders(root: Path) -> dict[str, str]:
    """The environment variables that put a user's folders under ``root``."""
    return {name: str(root / folder) for name, folder in USER_FOLDERS.items()}


def isolate_user(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Point the user's folders under ``root`` and clear every ``GPUTUI_*`` variable,
    undone by ``monkeypatch`` when the test ends."""
    for name in [name for name in os.environ if name.startswith(SETTINGS_PREFIX)]:
        monkeypatch.delenv(name)
    for name, value in user_folders(root).items():
        monkeypatch.setenv(name, value)
