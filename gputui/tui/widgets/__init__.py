"""The dashboard's panels: each draws one part of :class:`~gputui.view.state.DashboardState`."""
