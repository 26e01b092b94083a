"""The samplers (gputui.telemetry): GPU (fake and real NVML), host, GPU processes, sampling cost."""
