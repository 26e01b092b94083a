"""The dashboard's panels: each draws one part of :class:`~gputui.tui.state.DashboardState`."""
