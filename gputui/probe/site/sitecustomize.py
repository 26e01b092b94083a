"""gputui's probe hook, imported by Python's ``site`` at start because gputui put this
directory first on PYTHONPATH.  It imports nothing of gputui (the child may run another
interpreter, without gputui) and no torch.

Two jobs, in this order:

1. With ``GPUTUI_PROBE_SOCKET`` set, a meta-path finder that finds nothing itself: when
   the script imports ``torch.optim.optimizer`` and ``torch.utils.data.dataloader``, it
   lets the real finder find them and has ``_gputui_probe`` patch each right after it
   has loaded.  A script that never imports torch pays for one set lookup per import.
2. Always, the ``sitecustomize`` this one shadows (the next on sys.path: a distribution's,
   a virtual environment's, the user's) runs as it would without gputui.  Its errors
   propagate to site.py, which prints them and goes on, as it would have; the probe is
   installed first, so it works even then.  Once it ran, ``sys.modules["sitecustomize"]``
   is that module, so code that reads its attributes finds them.
"""

import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))
_TARGETS = ("torch.optim.optimizer", "torch.utils.data.dataloader")


def _patch(name, module):
    """Load the probe (from this directory, whatever sys.path holds by now) and let it
    patch ``module``.  Never raises: the probe reports its own failures."""
    try:
        probe = sys.modules.get("_gputui_probe")
        if probe is None:
            import importlib.util

            spec = importlib.util.spec_from_file_location("_gputui_probe", os.path.join(_HERE, "_gputui_probe.py"))
            if spec is None or spec.loader is None:
                raise ImportError("_gputui_probe.py is not beside this sitecustomize")
            probe = importlib.util.module_from_spec(spec)
            sys.modules["_gputui_probe"] = probe
            spec.loader.exec_module(probe)
        probe.patch(name, module)
    except Exception:
        pass


class _ProbeFinder:
    """Finds nothing: for the target modules it asks the finders after it, and wraps the
    loader's ``exec_module`` so the module is patched once it has run.  Steps aside after
    the last target."""

    def __init__(self, targets):
        self._pending = set(targets)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self._pending:
            return None
        self._pending.discard(fullname)
        if not self._pending:
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)  # what importlib would have called next, in the same order
            if spec is not None:
                _wrap_loader(spec, fullname)
                return spec
        return None


def _wrap_loader(spec, fullname):
    """Patch the module after the loader ran it: an attribute on this loader instance
    (module.__loader__ stays the real one), removed on first use."""
    loader = spec.loader
    try:
        if loader is None or isinstance(loader, type):  # a class-level loader is shared by many modules
            return
        exec_module = loader.exec_module

        def exec_and_patch(module):
            try:
                del loader.exec_module
            except AttributeError:
                pass
            exec_module(module)  # its errors are the import's, unchanged
            if getattr(module, "__name__", None) == fullname:
                _patch(fullname, module)

        loader.exec_module = exec_and_patch
    except Exception:
        pass  # no probe for this module; the import goes on as without us


def _chain():
    """Import the next ``sitecustomize`` on sys.path, with this directory taken off it
    meanwhile.  No other one is no error; its own errors propagate (see the docstring)."""
    ours = sys.modules.get("sitecustomize")
    removed = [(i, p) for i, p in enumerate(sys.path) if isinstance(p, str) and os.path.realpath(p or os.curdir) == _HERE]
    for i, _ in reversed(removed):
        del sys.path[i]
    sys.modules.pop("sitecustomize", None)
    try:
        __import__("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if ours is not None:  # none to chain to: we stay the module
            sys.modules["sitecustomize"] = ours
    finally:
        for i, p in removed:  # where they were (the user's one may have changed sys.path)
            sys.path.insert(min(i, len(sys.path)), p)


_self = sys.modules.get(__name__)
if _self is not None:
    sys.modules["_gputui_sitecustomize"] = _self  # keeps this module alive once another replaces it
if os.environ.get("GPUTUI_PROBE_SOCKET") and not any(type(f).__name__ == "_ProbeFinder" for f in sys.meta_path):
    sys.meta_path.insert(0, _ProbeFinder(_TARGETS))
_chain()
