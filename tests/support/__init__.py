"""What the tests share: a NVML test double, gputui run as a process, scripted dashboard sessions, trace loaders."""
