"""A sample as recordings hold it (a test helper, no tests)."""

from __future__ import annotations

from gputui.model import GpuProcess, GpuSample, HostSample, ProcessSample, Sample


def make_sample(t: float) -> Sample:
    return Sample(
        t=t,
        gpus=[
            GpuSample(
                index=0, util_gpu=97.0, temp_c=66.0, throttle_reasons=["SwPowerCap"], throttle_mask=4, processes=[GpuProcess(pid=42, used_memory=1 << 30)]
            ),
            GpuSample(index=1, lost=True),
        ],
        host=HostSample(cpu_percent=12.5, per_core=[10.0, 15.0], processes=[ProcessSample(pid=42, role="main", cpu_percent=99.0, rss=1 << 28)]),
    )
