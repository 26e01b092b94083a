"""``python -m gputui.live``: a detached run's own process (gputui.live.host.main)."""

from gputui.live.host import main

raise SystemExit(main())
