"""Save what the dashboard shows, as SVG: from the palette's Screenshot command
(:func:`~gputui.tui.screenshot_files.save_screenshot_file`, into the current directory or
$GPUTUI_SCREENSHOT_DIR), or
(with plain text beside it) from a script:

    python -m gputui.tui.screenshot OUT.svg --preset NAME --after 20 [--size 160x48]

It runs the real app headless (no terminal needed), with real telemetry, starts the
preset, waits ``--after`` seconds, saves the screen and quits (stopping the run).
The theme choice is not remembered: settings go to a temporary directory.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from gputui.errors import UserError
from gputui.presets.preset import get_preset, load_config
from gputui.safe_write import write_atomic
from gputui.session.baseline import baseline_from_recording
from gputui.session.options import RunOptions


def screen_text(app) -> str:
    """The screen as plain text, as a terminal would show it (no colours)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, force_terminal=True, color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected COLUMNSxROWS, e.g. 160x48, got {text!r}") from None
    return width, height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gputui.tui.screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the SVG file to write (OUT.txt gets the text)")
    parser.add_argument("--preset", metavar="NAME", help="start this preset (else: watch only)")
    parser.add_argument("--presets", type=Path, metavar="FILE", help="an extra presets file")
    parser.add_argument("--after", type=float, default=20.0, metavar="S", help="seconds to wait before the shot (default 20)")
    parser.add_argument("--size", type=_size, default=(160, 48), metavar="WxH", help="terminal size (default 160x48)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="sampling interval (default 1)")
    parser.add_argument("--baseline", type=Path, metavar="FILE", help="a one-GPU recording: a data-parallel preset's scaling shows")
    parser.add_argument("--keep-summary", action="store_true", help="if the run ended, shoot its summary, not the dashboard")
    args = parser.parse_args(argv)
    try:
        config = load_config(extra=args.presets)
        preset = get_preset(config.presets, args.preset) if args.preset else None
        baseline = baseline_from_recording(args.baseline) if args.baseline is not None else None
        options = RunOptions(config=config, preset=preset, interval=args.interval, baseline=baseline)
        try:  # before the app runs: a folder that cannot be made is one line, not a traceback after the shot
            args.out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"{args.out}: cannot write the screenshot there ({exc.strerror or exc})") from None
    except UserError as exc:
        print(f"gputui: error: {exc}", file=sys.stderr)
        return 2

    from gputui.tui.live_app import DashboardLook, make_app

    with tempfile.TemporaryDirectory(prefix="gputui-shot-") as scratch:
        app = make_app(options, look=DashboardLook(theme=args.theme, settings_file=Path(scratch) / "settings.toml"))

        async def shoot(pilot) -> None:
            await pilot.pause(args.after)
            if not args.keep_summary:
                while app.screen is not app.dashboard:  # a run that ended shows its summary on top
                    await app.pop_screen()
            app.refresh_dashboard(force=True)
            await pilot.pause(0.3)
            write_atomic(args.out, app.export_screenshot(title=f"gputui {args.preset or 'watch'}"))
            write_atomic(args.out.with_suffix(".txt"), screen_text(app))
            await app.quit_now()  # stopping the run: no question asked

        app.run(headless=True, size=args.size, auto_pilot=shoot)
    print(f"wrote {args.out} and {args.out.with_suffix('.txt')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
