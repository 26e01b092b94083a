"""gputui's probe inside the user's training process: how the loop runs, with no change
to the script.  ``sitecustomize`` (beside it) loads it when torch's optimizer and
DataLoader modules have loaded, and calls :func:`patch` for each.

- Optimizer steps: a global post-hook (``register_optimizer_step_post_hook``, PyTorch
  2.0+), which fires once per ``step()`` of any optimizer, wrapped ones too (accelerate's
  AcceleratedOptimizer, Lightning's).
- DataLoader: ``_BaseDataLoaderIter.__next__`` wrapped, timing how long the loop waits for
  each batch, counting batches and samples (the leading dimension of the batch's first
  tensor) and noting the iterator's worker count.
- The loop's own data work, where no DataLoader does it (nanoGPT's ``get_batch()``): from
  the first optimizer step, a daemon thread looks at the stepping thread's stack 50 times
  a second and counts the looks that land in data loading (a function such as
  ``get_batch``, ``__getitem__``, ``collate``; a frame in torch.utils.data, PIL,
  torchvision's io and transforms, datasets, tokenizers), naming the function it saw most.
- At an optimizer step at least 1 s after the last report: one ``probe`` line for that
  window, sent as one datagram to ``GPUTUI_PROBE_SOCKET`` (non-blocking; dropped if no
  one listens or the buffer is full).

It must never break the script: every wrapper calls the original once and returns its
result or raises its exception unchanged; a failure of the probe's own bookkeeping
sends one ``probe_status`` "off" line and turns every wrapper into a pass-through for
the rest of the process.  It never prints.  It imports nothing of gputui (the child may
run another interpreter) and imports no torch: it only patches what the script loaded.
"""

import dataclasses
import functools
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping

# gputui.protocol.encode, copied: this file runs in the user's interpreter, where gputui
# may not be installed (and must not be imported: its package would load in the child).
MARKER = "@gputui "
VERSION = 1


def encode(event, **fields):
    payload = {"event": event, **{k: v for k, v in fields.items() if v is not None}}
    return MARKER + json.dumps(payload, separators=(",", ":"), allow_nan=False)


REPORT_EVERY_S = 1.0
_OPTIMIZER = "torch.optim.optimizer"
_DATALOADER = "torch.utils.data.dataloader"
_SCAN_ITEMS = 4  # elements of a list/tuple/mapping looked at for a tensor, per level
_SCAN_DEPTH = 3
SAMPLE_EVERY_S = 0.02  # 50 looks a second: ~50 per report, each a few microseconds
_STACK_DEPTH = 64  # frames looked at per look, innermost first
# A function of the loop's own data work, by name (nanoGPT's get_batch, a Dataset's
# __getitem__, a collate function) ...
_DATA_FUNCTIONS = re.compile(r"_?(get|next|load|fetch|read|sample|make|prepare)_?batch(es)?|__getitems?__|(default_)?collate(_fn)?")
# ... or by the library it runs in (a path inside site-/dist-packages).
_DATA_LIBRARIES = (
    "torch/utils/data/",
    "PIL/",
    "torchvision/io/",
    "torchvision/transforms/",
    "torchvision/datasets/",
    "datasets/",
    "tokenizers/",
    "transformers/tokenization_",
    "transformers/data/",
    "webdataset/",
    "nvidia/dali/",
)

_path = os.environ.get("GPUTUI_PROBE_SOCKET")
_on = bool(_path)
_sock = None
_patched: "list[str]" = []
_hooks: "list[str]" = []
_note = None
_step_handle = None

# The window since the last report; module globals: the hot path reads them cheaply.
_t_last = None  # time.monotonic() at the window's start; None before the first batch or step
_steps = 0
_batches = 0
_samples = 0
_samples_known = True
_wait = 0.0
_workers = None

# The sampler's counts (the sampler thread writes them, the report reads the difference).
_loop_thread = None  # threading.get_ident() of the thread that steps the optimizer
_looks = 0
_data_looks = 0
_sites: "dict[str, int]" = {}  # data site -> looks, this window
_looks_reported = (0, 0)


def _resolve_compiling():
    """``torch.compiler.is_compiling`` once torch has it (it may load after the probe
    armed), else never.  While Dynamo traces, the wrappers step aside: traced, the
    probe's bookkeeping would break the user's graph and make Dynamo warn on stderr."""
    global _compiling
    found = getattr(getattr(sys.modules.get("torch"), "compiler", None), "is_compiling", None)
    if callable(found):
        _compiling = found
        return found()
    return False


_compiling = _resolve_compiling


def _reset_window():
    global _t_last, _steps, _batches, _samples, _samples_known, _wait, _workers
    _t_last, _steps, _batches, _samples, _samples_known, _wait, _workers = None, 0, 0, 0, True, 0.0, None


def _after_fork():
    """A forked child (a DataLoader worker) starts with nothing counted and its own socket;
    it never steps an optimizer, so it never reports.  The sampler thread did not fork."""
    global _sock, _loop_thread, _looks, _data_looks, _sites, _looks_reported
    _sock = None
    _reset_window()
    _loop_thread, _looks, _data_looks, _sites, _looks_reported = None, 0, 0, {}, (0, 0)


def data_site(frame):
    """Where ``frame``'s stack does data work: ``"get_batch (train.py:112)"`` for the
    outermost data function of the script's own, ``"DataLoader"`` for torch's, the
    library's file otherwise; None when it does none."""
    site = None
    depth = 0
    while frame is not None and depth < _STACK_DEPTH:
        code = frame.f_code
        path = code.co_filename.replace("\\", "/")
        library = path.partition("-packages/")[2]
        if library:
            if library.startswith(_DATA_LIBRARIES):
                site = "DataLoader" if library.startswith("torch/utils/data/") else library.split("/")[0] + "/" + library.rsplit("/", 1)[-1]
        elif _DATA_FUNCTIONS.fullmatch(code.co_name):
            site = f"{code.co_name} ({os.path.basename(path)}:{code.co_firstlineno})"
        frame = frame.f_back
        depth += 1
    return site


def _look():
    """One look at the loop thread's stack."""
    global _looks, _data_looks
    frame = sys._current_frames().get(_loop_thread) if _loop_thread is not None else None
    if frame is None:
        return
    site = data_site(frame)
    del frame  # a frame held on to keeps its locals alive
    _looks += 1
    if site is not None:
        _data_looks += 1
        _sites[site] = _sites.get(site, 0) + 1


def _sample_loop():
    sleep = time.sleep
    try:
        while _on and _loop_thread is not None:
            sleep(SAMPLE_EVERY_S)
            _look()
    except Exception as exc:
        _off(exc)


def _start_sampler():
    global _loop_thread
    _loop_thread = threading.get_ident()
    threading.Thread(target=_sample_loop, name="gputui-probe-sampler", daemon=True).start()


def _take_looks():
    """(looks, data looks, the site seen most) since the last report."""
    global _sites, _looks_reported
    looks, data = _looks, _data_looks
    sites, _sites = _sites, {}
    window = (looks - _looks_reported[0], data - _looks_reported[1])
    _looks_reported = (looks, data)
    return window[0], window[1], max(sites, key=lambda site: sites[site]) if sites else None


def _send(line):
    global _sock
    if _path is None:
        return  # started without gputui's socket: nobody to tell
    try:
        if _sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            _sock = sock
        _sock.sendto(line.encode("utf-8"), _path)
    except (OSError, ValueError):
        pass  # no listener, a full buffer: the report is dropped, the loop never waits


def _short(exc):
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    return text[:200]


def _off(exc):
    """The probe failed: say so once, and pass everything through from now on."""
    global _on
    if not _on:
        return
    _on = False
    try:
        _send(encode("probe_status", state="off", pid=os.getpid(), error=_short(exc)))
        if _step_handle is not None:
            _step_handle.remove()
    except Exception:
        pass


def _rank():
    """(rank, world_size) as torchrun sets them; (None, None) for one process."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None, None
    if world < 2 or not 0 <= rank < world:
        return None, None
    return rank, world


def leading_dimension(batch, depth=0):
    """The leading dimension of the first tensor (anything with a non-empty tuple
    ``shape``: torch, numpy) in ``batch``, looking into lists, tuples, mappings (an HF
    BatchEncoding is one) and dataclasses up to 3 levels deep; None if there is none."""
    shape = getattr(batch, "shape", None)
    if isinstance(shape, tuple):  # torch.Size is a tuple
        if shape:
            return int(shape[0])
        return None  # 0-d: a scalar, not a batch
    if depth >= _SCAN_DEPTH:
        return None
    if isinstance(batch, (list, tuple)):
        items = batch[:_SCAN_ITEMS]
    elif isinstance(batch, Mapping):
        items = []
        for value in batch.values():
            items.append(value)
            if len(items) == _SCAN_ITEMS:
                break
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = [getattr(batch, f.name) for f in dataclasses.fields(batch)[:_SCAN_ITEMS]]
    else:
        return None
    for item in items:
        n = leading_dimension(item, depth + 1)
        if n is not None:
            return n
    return None


def _count_batch(iterator, batch, waited):
    global _t_last, _batches, _samples, _samples_known, _wait, _workers
    if _t_last is None:
        _t_last = time.monotonic() - waited  # the first window starts as the loop asks for its first batch
    _batches += 1
    _wait += waited
    _workers = getattr(iterator, "_num_workers", None)
    n = leading_dimension(batch)
    if n is None:
        _samples_known = False
    else:
        _samples += n


def _wrap_next(original):
    perf_counter = time.perf_counter

    @functools.wraps(original)
    def __next__(self):
        if not _on:
            return original(self)
        try:
            traced = _compiling()
        except Exception as exc:
            _off(exc)
            traced = True
        if traced:
            return original(self)
        began = perf_counter()
        batch = original(self)
        waited = perf_counter() - began
        try:
            _count_batch(self, batch, waited)
        except Exception as exc:
            _off(exc)
        return batch

    __next__.__gputui_probe__ = True  # type: ignore[attr-defined]  # our mark: patched once
    return __next__


def _on_step(optimizer, args, kwargs):
    """The global optimizer post-hook: count the step; report if the window is 1 s long."""
    global _t_last, _steps
    if not _on:
        return
    try:
        if _compiling():  # a step traced by torch.compile is not counted (see _resolve_compiling)
            return
        now = time.monotonic()
        if _loop_thread is None:
            _start_sampler()
        if _t_last is None:  # no batch yet: this step opens the first window
            _t_last = now
            return
        _steps += 1
        seconds = now - _t_last
        if seconds < REPORT_EVERY_S:
            return
        rank, world = _rank()
        looks, data_looks, site = _take_looks()
        line = encode(
            "probe",
            v=VERSION,
            steps=_steps,
            seconds=round(seconds, 6),
            batches=_batches,
            samples=_samples if _samples_known and _batches else None,
            data_wait_s=round(_wait, 6),
            workers=_workers,
            looks=looks,
            data_looks=data_looks,
            data_site=site,
            pid=os.getpid(),
            rank=rank,
            world_size=world,
        )
        _reset_window()
        _t_last = now
        _send(line)
    except Exception as exc:
        _off(exc)


def _patch_optimizer(module):
    global _step_handle, _note
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is None:
        _note = "no register_optimizer_step_post_hook (PyTorch < 2.0): optimizer steps are not counted"
        return
    _step_handle = register(_on_step)
    _hooks.append("optimizer_step")


def _patch_dataloader(module):
    cls = module._BaseDataLoaderIter
    if getattr(cls.__next__, "__gputui_probe__", False):
        return
    cls.__next__ = _wrap_next(cls.__next__)
    _hooks.append("dataloader")


def patch(name, module):
    """Hook ``module`` (one of the two targets) right after it loaded; once both are
    hooked, say the probe is armed."""
    if not _on or name in _patched:
        return
    try:
        if name == _OPTIMIZER:
            _patch_optimizer(module)
        elif name == _DATALOADER:
            _patch_dataloader(module)
        else:
            return
        _patched.append(name)
        if len(_patched) == 2:
            torch = sys.modules.get("torch")
            version = getattr(torch, "__version__", None)
            _send(
                encode(
                    "probe_status",
                    state="armed",
                    pid=os.getpid(),
                    torch=None if version is None else str(version),
                    hooks=[h for h in ("optimizer_step", "dataloader") if h in _hooks],
                    note=_note,
                )
            )
    except Exception as exc:
        _off(exc)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
