#!/usr/bin/env python3
"""SVG screenshots of the dashboard in every shipped theme at 80×24 and 140×40,
fed by the test suite's synthetic sessions (fixed times, two fake H200s, one finding),
so a re-run after a layout change shows only that change.

    python scripts/dashboard-screens.py [--out docs/screens]

Writes dashboard-THEME-WxH.svg (and .txt, the same screen as text) into the folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZES = ((80, 24), (140, 40))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screens", help="folder (default docs/screens)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))  # gputui and the test suite's synthetic sessions, from this checkout

    from gputui.safe_write import write_atomic
    from gputui.tui.themes import load_themes
    from tests.support.snapshots import render

    with tempfile.TemporaryDirectory(prefix="gputui-screens-") as scratch:
        themes = sorted(load_themes(Path(scratch) / "no-user-themes")[0])
        for theme in themes:
            for width, height in SIZES:
                text, svg = render((width, height), Path(scratch) / f"{theme}-{width}", theme)
                name = f"dashboard-{theme}-{width}x{height}"
                write_atomic(args.out / f"{name}.svg", svg)
                write_atomic(args.out / f"{name}.txt", text)
                print(f"wrote {args.out / name}.svg", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
