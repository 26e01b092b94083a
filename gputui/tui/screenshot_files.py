"""Where the dashboard's own screenshots go, and how one is saved (the palette's
Screenshot, and `python -m gputui.tui.screenshot`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

SCREENSHOT_DIR_ENV = "GPUTUI_SCREENSHOT_DIR"


def screenshot_dir() -> Path:
    """Where the palette's screenshots go: $GPUTUI_SCREENSHOT_DIR, else the current
    directory (Textual's default, ~/Downloads, does not exist on most servers)."""
    return Path(os.environ.get(SCREENSHOT_DIR_ENV) or os.getcwd())


def save_screenshot_file(app, folder: Path | None = None, filename: str | None = None) -> Path:
    """The screen as SVG in ``folder`` (default :func:`screenshot_dir`), under a new
    dated name unless ``filename`` is given; the path written.  Raises OSError."""
    from gputui.safe_write import write_atomic

    folder = folder or screenshot_dir()
    stem = time.strftime("gputui-%Y%m%d-%H%M%S")
    path = folder / (filename or f"{stem}.svg")
    number = 1
    while filename is None and path.exists():  # two in one second: keep both
        number += 1
        path = folder / f"{stem}-{number}.svg"
    write_atomic(path, app.export_screenshot(title="gputui"))
    return path
