"""Theme files: one TOML file per theme, mapping onto ``textual.theme.Theme``.

::

    name = "gputui-dark"          # optional: the file name without .toml otherwise
    dark = true
    primary = "#4EA1FF"           # the only required colour
    secondary = "#7C8FA6"         # also: warning, error, success, accent, foreground,
                                  # background, surface, panel, boost
    ansi = false                  # true: use the terminal's own 16 colours
    [variables]                   # Textual and gputui variables, e.g. chart colours
    chart-bar = "#4EA1FF"

Built-in themes ship in ``themes/`` (``gputui/themes`` in the wheel); users add theirs
in ``$XDG_CONFIG_HOME/gputui/themes/``, where a theme of the same name wins.
"""

from __future__ import annotations

from pathlib import Path

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter
from textual.theme import Theme

from gputui.config import user_themes_path
from gputui.errors import UserError
from gputui.text_files import TomlTable, load_toml

DEFAULT_THEME = "gputui-dark"

_COLOURS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground", "background", "surface", "panel", "boost")
_NUMBERS = ("luminosity_spread", "text_alpha")
_FLAGS = ("dark", "ansi")


def builtin_themes_path() -> Path:
    """The themes shipped with gputui: inside the installed package, else the repo root."""
    packaged = Path(__file__).resolve().parent.parent / "themes"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "themes"


def _is_colour(value: str) -> bool:
    """Whether Textual can draw ``value``: a theme it cannot parse would end the dashboard
    when applied, not when read."""
    try:
        Color.parse(value)
    except Exception:
        return False
    return True


def parse_theme(path: Path) -> Theme:
    """One theme file; UserError naming the file and key when it does not fit."""
    try:
        data = load_toml(path, "theme file")
    except FileNotFoundError:
        raise UserError(f"{path}: cannot read (no such file)") from None
    fields: TomlTable = {"name": path.stem}
    for key, value in data.items():
        if key == "name":
            if not isinstance(value, str) or not value:
                raise UserError(f"{path}: name: expected a non-empty string")
            fields[key] = value
        elif key in _COLOURS:
            if not isinstance(value, str) or not _is_colour(value):
                raise UserError(f'{path}: {key}: expected a colour string, e.g. "#4EA1FF" or "ansi_blue"')
            fields[key] = value
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise UserError(f"{path}: {key}: expected true or false")
            fields[key] = value
        elif key in _NUMBERS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise UserError(f"{path}: {key}: expected a number from 0 to 1")
            fields[key] = float(value)
        elif key == "variables":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise UserError(f'{path}: [variables]: expected name = "value" strings')
            fields[key] = dict(value)
        else:
            known = ", ".join(("name", *_COLOURS, *_FLAGS, *_NUMBERS, "variables"))
            raise UserError(f"{path}: {key}: unknown key (known: {known})")
    if "primary" not in fields:
        raise UserError(f"{path}: primary: missing (every theme needs a primary colour)")
    return Theme(**fields)


def load_themes(user_dir: Path | None = None) -> tuple[dict[str, Theme], list[str]]:
    """Built-in then user themes by name, and one line per user file that was skipped.

    A broken built-in theme is a bug and raises; a broken user theme only costs that
    theme, so a typo in one file never keeps the dashboard from starting.
    """
    themes: dict[str, Theme] = {}
    for path in sorted(builtin_themes_path().glob("*.toml")):
        theme = parse_theme(path)
        themes[theme.name] = theme
    problems: list[str] = []
    folder = user_dir if user_dir is not None else user_themes_path()
    if folder.is_dir():
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = parse_theme(path)
            except UserError as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return themes, problems


class AnsiMutedDim(LineFilter):
    """In an ANSI theme, no "dim": terminals draw it at about half strength, under 4.5:1
    on a dark background.  Dim text in the default colour gets the terminal's white
    (colour 7, 9:1 on black) instead; dim text in a colour keeps just the colour."""

    MUTED = Style(color=RichColor.from_ansi(7), dim=False)
    NOT_DIM = Style(dim=False)

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [self._undimmed(seg) if seg.style is not None and seg.style.dim else seg for seg in segments]

    def _undimmed(self, seg: Segment) -> Segment:
        style = seg.style
        assert style is not None
        default = style.color is None or style.color.is_default
        return Segment(seg.text, style + (self.MUTED if default else self.NOT_DIM), seg.control)
