"""The Session (gputui.session): assembly, the summary, data-parallel ranks and scaling, pinned GPUs."""
