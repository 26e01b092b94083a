"""The samplers: GPUs through NVML, the host and the run's processes through psutil."""

# What other packages may import (the samplers); tests/whole/test_package_faces.py holds them to it.
__all__ = ["gpu", "host", "nvml", "pinning", "xid_watcher"]
