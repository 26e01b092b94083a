"""Dashboard settings that outlive a session, in ``$XDG_CONFIG_HOME/gputui/settings.toml``.

Read through gputui.text_files (a regular file, bounded; a file it cannot use leaves
the defaults and one notice); written with tomlkit so that a user's comments and keys we do not
know survive, through a temporary file, fsync and ``os.replace``: a crash mid-write
leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gputui.config import user_settings_path as settings_path
from gputui.errors import UserError
from gputui.safe_write import write_atomic
from gputui.text_files import load_toml, read_text_file

__all__ = ["DashboardSettings", "load_settings", "save_setting", "settings_path"]


@dataclass
class DashboardSettings:
    theme: str | None = None
    keys: dict[str, str] = field(default_factory=dict)  # binding id -> key(s), e.g. stop_run = "x"


def load_settings(path: Path) -> tuple[DashboardSettings, str | None]:
    """The settings, and a problem to show when the file could not be used."""
    try:
        data = load_toml(path, "settings file")
    except FileNotFoundError:
        return DashboardSettings(), None
    except UserError as exc:  # too big, not a file, not TOML, nested too deep: the defaults, and why
        return DashboardSettings(), f"{exc}; ignored, using the defaults"
    theme = data.get("theme")
    if theme is not None and not isinstance(theme, str):
        return DashboardSettings(), f"{path}: theme: expected a string; ignored"
    keys = data.get("keys", {})
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        return DashboardSettings(theme=theme), f'{path}: [keys]: expected binding_id = "key" strings; ignored'
    return DashboardSettings(theme=theme, keys=dict(keys)), None


def save_setting(path: Path, key: str, value: str) -> None:
    """Set one key, keeping the rest of the file as it was.  Raises OSError, or
    ValueError when the existing file is not TOML (we never overwrite it then)."""
    import tomlkit  # only when something is saved: not on the way to the first frame

    try:
        document = tomlkit.parse(read_text_file(path, "settings file"))
    except FileNotFoundError:
        document = tomlkit.document()
        document.add(tomlkit.comment("gputui settings (written by the dashboard; edits are kept)"))
    except UserError as exc:
        raise ValueError(f"{exc}; not changing it") from None
    except (tomlkit.exceptions.ParseError, RecursionError, ValueError) as exc:
        raise ValueError(f"{path} is not TOML gputui can read ({type(exc).__name__}); not changing it") from None
    if document.get(key) == value:
        return
    document[key] = value
    write_atomic(path, tomlkit.dumps(document))
