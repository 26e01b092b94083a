"""Where gputui's own files live, and the one TOML reader every loader uses.

``$XDG_CONFIG_HOME/gputui/`` (``~/.config/gputui/`` when unset) holds the user's
``presets.toml``, ``settings.toml`` and ``themes/``.  Each loader (presets, dashboard
settings, themes) asks this module for its path and for ``tomllib``, so the XDG rule
and the Python 3.10 fallback are written once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["tomllib", "config_dir", "user_presets_path", "user_settings_path", "user_themes_path"]


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/gputui``, read at each call so tests can point it elsewhere."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "gputui"


def user_presets_path() -> Path:
    return config_dir() / "presets.toml"


def user_settings_path() -> Path:
    return config_dir() / "settings.toml"


def user_themes_path() -> Path:
    return config_dir() / "themes"
