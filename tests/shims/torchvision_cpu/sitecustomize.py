"""TEST-ONLY: make PyPI's CUDA torchvision wheel importable next to a CPU-only torch.

CI (no GPU) installs torch's CPU wheel, but the only torchvision wheel for it is built
for CUDA: its C extension (detection ops such as nms) cannot load without CUDA torch,
and ``torchvision._meta_registrations`` then fails registering fake kernels for those
missing ops.  The model definitions gputui uses are pure Python and never touch them.
This hook skips registrations for ops that do not exist, nothing else.  tests/conftest.py
puts it on PYTHONPATH only when that exact failure is detected; gputui never uses it.

The patch is applied when torchvision is first imported, not at interpreter start, so
the many test subprocesses that never touch torchvision do not pay for importing torch.
"""

import sys


def _tolerant(register_fake):
    def tolerant_register_fake(op, *args, **kwargs):
        decorator = register_fake(op, *args, **kwargs)
        if not callable(decorator) or (args and callable(args[0])):
            return decorator

        def register(fn):
            try:
                return decorator(fn)
            except RuntimeError as exc:
                if "does not exist" not in str(exc):
                    raise
                return fn

        return register

    return tolerant_register_fake


class _PatchBeforeTorchvision:
    """A meta-path hook that finds nothing: it patches torch.library once, the first
    time anything asks for torchvision, then steps aside."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch.library as library

            library.register_fake = _tolerant(library.register_fake)
        return None


sys.meta_path.insert(0, _PatchBeforeTorchvision())
