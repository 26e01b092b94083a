"""gputui's probe inside the user's training process: how the loop runs, with no change
to the script.  ``sitecustomize`` (beside it) loads it when torch's optimizer and
DataLoader modules have loaded, and calls :func:`patch` for each.

- Optimizer steps: a global post-hook (``register_optimizer_step_post_hook``, PyTorch
  2.0+), which fires once per ``step()`` of any optimizer, wrapped ones too (accelerate's
  AcceleratedOptimizer, Lightning's).
- Backward passes: ``torch.autograd.backward`` wrapped (``Tensor.backward`` calls it, and
  so do accelerate's, Lightning's and DeepSpeed's backward), only to know that the loop
  trained.
- Mode switches: ``torch.nn.Module.train`` wrapped (``model.eval()`` calls it), only to
  know where a loop without a DataLoader evaluated (below).
- DataLoader: ``_BaseDataLoaderIter.__next__`` wrapped, timing how long the loop waits for
  each batch, counting batches and samples (the leading dimension of the batch's first
  tensor) and noting the iterator's worker count; ``__init__`` wrapped to know when a
  pass over a loader began.
- The loop's own data work, where no DataLoader does it (nanoGPT's ``get_batch()``): from
  the first optimizer step until a DataLoader is seen feeding the training, a daemon
  thread looks at the stepping thread's stack 50 times a second and counts the looks that land in data loading (a function such as
  ``get_batch``, ``__getitem__``, ``collate``; a frame in torch.utils.data, PIL,
  torchvision's io and transforms, datasets, tokenizers), naming the function it saw most.
- At an optimizer step at least 1 s after the last report: one ``probe`` line for that
  window, sent as one datagram to ``GPUTUI_PROBE_SOCKET`` (non-blocking; dropped if no
  one listens or the buffer is full).

Training or evaluation.  Validation loops fetch from a DataLoader too, and their batches
are no training samples.  The probe tells them apart by what the loop does between two
batches of one pass over one DataLoader iterator: a training loop calls backward (every
micro-batch, gradient accumulation too) or steps the optimizer before it fetches the next
batch; an evaluation loop does neither.  So a pass is training as soon as a backward or a
step falls between two of its batches, or follows its latest batch before any other
loader fetches (the batch being trained on); it is evaluation once three of its batches
come in a row with neither between them (three, not two: Lightning's and accelerate's
loaders fetch one batch ahead, so the first two batches of a training pass come back to
back).  Until it is known, a pass's batches wait uncounted (the report waits for them, a
few steps at most).  Grad mode is no evidence for a batch: accelerate's and the HF
Trainer's loops fetch eval batches outside ``torch.no_grad()`` and timm's inside it; a
backward in an evaluation (a gradient-based metric) makes it training, a rare case the
docs name.

Where no DataLoader fetches (nanoGPT's ``estimate_loss()`` on its own ``get_batch()``),
a model's switch to eval mode and its switch back bound an evaluation when the switch
back comes with gradients off (inside the evaluation's ``torch.no_grad()``) and no
backward, step or batch came between (:func:`_mode_switched`): ``model.eval()`` alone is
no evidence (a teacher stays in eval mode while the student trains; ``from_pretrained``
leaves a model in eval mode until the loop trains it with gradients on).

A window counts training only: its ``batches``, ``samples`` and ``seconds`` leave out
evaluation, whose batches, samples and time it lists apart (``eval_batches``,
``eval_samples``, ``eval_seconds``).  An evaluation that lasts a report interval or more
gets windows of its own (``phase: evaluation``, no steps, ``ongoing`` until the last), so
gputui can show where it ran; the training window before it ends where it began.

It must never break the script: every wrapper calls the original once and returns its
result or raises its exception unchanged; a failure of the probe's own bookkeeping
sends one ``probe_status`` "off" line and turns every wrapper into a pass-through for
the rest of the process.  It never prints.  It imports nothing of gputui (the child may
run another interpreter) and imports no torch: it only patches what the script loaded.
"""

import atexit
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
VERSION = 2  # 2: batches, samples and seconds count training only; evaluation apart


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

TRAINING = "training"
EVALUATION = "evaluation"
EVAL_RUN = 3  # batches of one pass in a row, neither backward nor step between them: evaluation
POSTPONE_S = 4 * REPORT_EVERY_S  # the longest a report waits for a pass to be known
_UNRESOLVED_MAX = 64  # passes waiting for their kind (a loop taking one batch of a new iterator each time)
_SOURCE = "_gputui_probe_source"  # the attribute a DataLoader iterator carries its _Source in


class _Counts:
    """Batches fetched: how many, their samples (while every batch had a leading
    dimension), the time the loop waited for them, the loader's worker count."""

    __slots__ = ("batches", "samples", "known", "wait", "workers")

    def __init__(self):
        self.clear()

    def clear(self):
        self.batches, self.samples, self.known, self.wait, self.workers = 0, 0, True, 0.0, None

    def add(self, n, waited, workers):
        self.batches += 1
        self.wait += waited
        self.workers = workers
        if n is None:
            self.known = False
        else:
            self.samples += n

    def take(self, other):
        """Add ``other``'s counts to these, and empty it."""
        if other.batches:
            self.batches += other.batches
            self.samples += other.samples
            self.known = self.known and other.known
            self.wait += other.wait
            self.workers = other.workers
        other.clear()

    def fields(self):
        return {
            "batches": self.batches,
            "samples": self.samples if self.known and self.batches else None,
            "data_wait_s": round(self.wait, 6),
            "workers": self.workers,
        }


class _Source:
    """One DataLoader iterator: training, evaluation or not known yet (``kind``), the
    pass over it under way, and the batches fetched while its kind is not known."""

    __slots__ = ("kind", "evidence", "quiet", "created", "started", "last", "step", "done", "pending")

    def __init__(self, created=None):
        self.kind = None
        self.evidence = None  # _evidence at its last fetch of this pass; None before the pass's first
        self.quiet = 1  # its batches in a row, this pass, with no backward or step between them
        self.created = created  # when the iterator was made: its first pass began then
        self.started = None  # when its pending batches began (the pass's start for its first)
        self.last = None  # when its last fetch ended
        self.step = 0  # _step_count at its last fetch
        self.done = False  # its pass ran out
        self.pending = _Counts()


# The window since the last report; module globals: the hot path reads them cheaply.
_t_last = None  # time.monotonic() at the window's start; None before the first batch or step
_steps = 0
_train = _Counts()  # the window's training batches
_fed_by_loader = False  # a DataLoader has fed the training: the stack sampler is not needed
_folded = _Counts()  # evaluation within the window, too short for windows of its own
_folded_s = 0.0
_eval_since = None  # time.monotonic() where the evaluation under way began; None while training
_eval_split = False  # whether that evaluation has windows of its own (it lasted a report interval)
_stretch = _Counts()  # its batches since its last report
_evidence = 0  # backward passes and optimizer steps so far: the loop trained when it grew
_step_count = 0
_last = None  # the _Source of the latest fetch
_unresolved: "list[_Source]" = []  # sources with batches waiting for their kind
_fetches = 0  # DataLoader batches fetched so far
_mode_since = None  # time.monotonic() of the outermost model.eval() not yet followed by its model.train()
_mode_marks = (0, 0, 0)  # (id of that model, _evidence, _fetches) at that model.eval()
_mode_depth = 0  # Module.train calls under way: its recursion into submodules is one switch

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


def _reset_window(t):
    """A new window from ``t``, nothing counted in it."""
    global _t_last, _steps, _folded_s
    _t_last, _steps, _folded_s = t, 0, 0.0
    _train.clear()
    _folded.clear()


def _after_fork():
    """A forked child (a DataLoader worker) starts with nothing counted and its own socket;
    it never steps an optimizer, so it never reports.  The sampler thread did not fork."""
    global _sock, _loop_thread, _looks, _data_looks, _sites, _looks_reported
    global _eval_since, _eval_split, _evidence, _step_count, _last, _unresolved, _fetches, _mode_since, _mode_depth
    _sock = None
    _reset_window(None)
    _stretch.clear()
    _eval_since, _eval_split, _evidence, _step_count, _last, _unresolved = None, False, 0, 0, None, []
    _fetches, _mode_since, _mode_depth = 0, None, 0
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
    if _eval_since is not None:
        return  # the sampler judges the training loop's own data work, not an evaluation's
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
        # Once a DataLoader feeds the training, its batches time the data wait and the
        # looks go unused (a window with batches ignores them): the sampler stops, so a
        # Python-bound loop does not share its interpreter with it for nothing.
        while _on and _loop_thread is not None and not _fed_by_loader:
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


def _report(end, phase, ongoing=False):
    """Send the window from ``_t_last`` to ``end``: the training counted in it, or (an
    evaluation's own window) the evaluation's batches since its last report."""
    rank, world = _rank()
    if phase == TRAINING:
        looks, data_looks, site = _take_looks()
        counts = _train
        seconds = end - _t_last - _folded_s
        extra = {
            "looks": looks,
            "data_looks": data_looks,
            "data_site": site,
            "eval_batches": _folded.batches or None,
            "eval_samples": _folded.samples if _folded.known and _folded.batches else None,
            "eval_seconds": round(_folded_s, 6) if _folded_s > 0 else None,
        }
    else:
        counts = _stretch
        seconds = end - _t_last
        extra = {"ongoing": True if ongoing else None}
    _send(
        encode(
            "probe",
            v=VERSION,
            phase=phase,
            steps=_steps,
            seconds=round(max(seconds, 0.0), 6),
            **counts.fields(),
            **extra,
            pid=os.getpid(),
            rank=rank,
            world_size=world,
        )
    )


def _end_training_window(at):
    """An evaluation began at ``at``: the training before it, if any, is a window ending
    there, and the next window starts there."""
    if _steps or _train.batches:
        _report(at, TRAINING)
    _reset_window(at)


def _begin_eval(at):
    global _eval_since, _eval_split
    _eval_since, _eval_split = max(at, _t_last), False


def _end_eval(at):
    """The evaluation under way ended at ``at``: its last window, or (a short one) its
    batches and time folded into the training window."""
    global _eval_since, _eval_split, _folded_s
    at = max(at, _eval_since, _t_last)
    if _eval_split:
        _report(at, EVALUATION)
        _stretch.clear()
        _reset_window(at)
    else:
        _folded.take(_stretch)
        _folded_s += at - _eval_since
    _eval_since, _eval_split = None, False


def _eval_window(now):
    """During an evaluation: once it lasted a report interval, the training before it is
    one window and the evaluation gets its own, one a report interval."""
    global _eval_split
    if not _eval_split:
        if now - _eval_since < REPORT_EVERY_S:
            return
        _end_training_window(_eval_since)
        _eval_split = True
    if now - _t_last >= REPORT_EVERY_S:
        _report(now, EVALUATION, ongoing=True)
        _stretch.clear()
        _reset_window(now)


def _resolve(source, kind):
    """``source`` is ``kind`` from now on; its waiting batches are counted as such, from
    where they began."""
    source.kind = kind
    _forget(source)
    if not source.pending.batches:
        return
    if kind == TRAINING:
        if _eval_since is not None:
            _end_eval(source.started)
        _train.take(source.pending)
    else:
        if _eval_since is None:
            _begin_eval(source.started)
        _stretch.take(source.pending)


def _forget(source):
    try:
        _unresolved.remove(source)
    except ValueError:
        pass  # settled already


def _settle_oldest():
    """Too many passes wait: the oldest is training if the loop trained since its last
    batch, else evaluation."""
    source = _unresolved[0]
    _resolve(source, TRAINING if source.evidence != _evidence else EVALUATION)


def _settle_strays():
    """At a step: a pass still not known that ran out, or that fetched nothing for a whole
    step, was no part of the training (a one-off look at a validation batch).  Its batches
    and time are evaluation folded into this window."""
    global _folded_s
    for source in list(_unresolved):
        if source is _last or not (source.done or source.step < _step_count - 1):
            continue
        source.kind = EVALUATION
        _forget(source)
        if source.started is not None and source.last is not None and _t_last is not None:
            _folded_s += max(0.0, source.last - max(source.started, _t_last))
        _folded.take(source.pending)


def _trained(now):
    """A backward pass or an optimizer step: the latest batch's pass is training, and an
    evaluation under way has ended."""
    global _evidence
    _evidence += 1
    if _last is not None and _last.kind is None:
        _resolve(_last, TRAINING)
    if _eval_since is not None:
        _end_eval(now)


def _mode_switched(model, training, now, grad=True):
    """The outermost ``Module.train(mode)`` of ``model`` (an id; ``model.eval()`` is
    ``train(False)``) at ``now``, ``grad``: whether gradients are on.  From its switch
    to eval mode to its switch back made with gradients off, with no backward, step or
    DataLoader batch between, the loop evaluated where no loader could show it
    (nanoGPT's ``estimate_loss()``, decorated ``@torch.no_grad()``).  A switch back with
    gradients on ends the span unseen: the models that loading left in eval mode
    (``from_pretrained``) until the loop trains them, a rollout before an update.
    Another model's switches (a teacher kept in eval mode) end no span."""
    global _mode_since, _mode_marks
    marks = (model, _evidence, _fetches)
    if not training:
        if _mode_since is None or _mode_marks[1:] != marks[1:]:  # none open, or the open one trained
            _mode_since, _mode_marks = now, marks
        return
    if _mode_since is None or _mode_marks[0] != model:
        return
    since, _mode_since = _mode_since, None
    if _mode_marks == marks and not grad and _eval_since is None:  # no training in it, no batches the loader tells apart
        _mode_evaluated(since, now)


def _mode_evaluated(since, until):
    """An evaluation the mode switches showed, from ``since`` to ``until``: a window of its
    own when it lasted a report interval (the training before it one too), else folded
    into the training window; before the first window, its own window alone."""
    global _folded_s
    if _t_last is None:
        _reset_window(since)
        _report(until, EVALUATION)
        _reset_window(None)  # the first window begins at the first batch or step, as ever
        return
    since = max(since, _t_last)
    if until - since < REPORT_EVERY_S:
        _folded_s += until - since
        return
    _end_training_window(since)
    _report(until, EVALUATION)
    _reset_window(until)


def _count_batch(iterator, batch, began, waited, first, stopped):
    global _last, _fetches, _fed_by_loader
    now = began + waited
    _fetches += 1
    if _t_last is None:
        _reset_window(began)  # the first window starts as the loop asks for its first batch
    source = getattr(iterator, _SOURCE, None)
    if source is None:
        source = _Source()
        setattr(iterator, _SOURCE, source)
        first = True
    if first:  # a pass begins: a new iterator, or a persistent one reset
        at = source.created if source.created is not None else began
        source.created, source.evidence, source.quiet, source.done = None, None, 1, False
    else:
        at = began
        if source.evidence is not None:
            if source.evidence != _evidence:  # trained between two of its batches
                source.quiet = 1
                if source.kind != TRAINING:
                    _resolve(source, TRAINING)
            else:
                source.quiet += 1
                if source.kind is None and source.quiet >= EVAL_RUN:
                    _resolve(source, EVALUATION)
    source.evidence, source.step, source.last = _evidence, _step_count, now
    _last = source
    if stopped:
        source.done = True
        return
    n = leading_dimension(batch)
    workers = getattr(iterator, "_num_workers", None)
    kind = source.kind
    if kind is None:
        if not source.pending.batches:
            source.started = at
            _unresolved.append(source)
        source.pending.add(n, waited, workers)
        if len(_unresolved) > _UNRESOLVED_MAX:
            _settle_oldest()
    elif kind == TRAINING:
        _fed_by_loader = True
        if _eval_since is not None:
            _end_eval(at)
        _train.add(n, waited, workers)
    else:
        if _eval_since is None:
            _begin_eval(at)
        _stretch.add(n, waited, workers)
    if _eval_since is not None:
        _eval_window(now)


def _wrap_next(original):
    monotonic = time.monotonic

    @functools.wraps(original)
    def __next__(self):
        if not _on:
            return original(self)
        try:
            traced = _compiling()
            first = getattr(self, "_num_yielded", None) == 0
        except Exception as exc:
            _off(exc)
            traced = True
        if traced:
            return original(self)
        began = monotonic()
        try:
            batch = original(self)
        except StopIteration:
            try:
                _count_batch(self, None, began, monotonic() - began, first, True)
            except Exception as exc:
                _off(exc)
            raise
        waited = monotonic() - began
        try:
            _count_batch(self, batch, began, waited, first, False)
        except Exception as exc:
            _off(exc)
        return batch

    __next__.__gputui_probe__ = True  # type: ignore[attr-defined]  # our mark: patched once
    return __next__


def _wrap_init(original):
    monotonic = time.monotonic

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        began = monotonic()
        original(self, *args, **kwargs)
        if _on:
            try:
                setattr(self, _SOURCE, _Source(began))
            except Exception as exc:
                _off(exc)

    __init__.__gputui_probe__ = True  # type: ignore[attr-defined]
    return __init__


def _wrap_backward(original):
    @functools.wraps(original)
    def backward(*args, **kwargs):
        if _on:
            try:
                if not _compiling():
                    _trained(time.monotonic())
            except Exception as exc:
                _off(exc)
        return original(*args, **kwargs)

    backward.__gputui_probe__ = True  # type: ignore[attr-defined]
    return backward


def _wrap_train(original):
    monotonic = time.monotonic

    @functools.wraps(original)
    def train(self, *args, **kwargs):
        global _mode_depth
        if not _on or _mode_depth:
            return original(self, *args, **kwargs)
        _mode_depth += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            _mode_depth -= 1
        try:
            if not _compiling():
                training = bool(args[0] if args else kwargs.get("mode", True))
                grad = getattr(sys.modules.get("torch"), "is_grad_enabled", None)
                _mode_switched(id(self), training, monotonic(), grad() if training and callable(grad) else True)
        except Exception as exc:
            _off(exc)
        return result

    train.__gputui_probe__ = True  # type: ignore[attr-defined]
    return train


def _on_step(optimizer, args, kwargs):
    """The global optimizer post-hook: count the step (see :func:`_stepped`)."""
    if not _on:
        return
    try:
        if _compiling():  # a step traced by torch.compile is not counted (see _resolve_compiling)
            return
        if _loop_thread is None:
            _start_sampler()
        _stepped(time.monotonic())
    except Exception as exc:
        _off(exc)


def _stepped(now):
    """An optimizer step at ``now``: report if the window is 1 s long and every batch in
    it is known to be training or evaluation (or it waited POSTPONE_S for that)."""
    global _steps, _step_count
    _step_count += 1
    _trained(now)
    _settle_strays()
    if _t_last is None:  # no batch yet: this step opens the first window
        _reset_window(now)
        return
    _steps += 1
    if now - _t_last < REPORT_EVERY_S or (_unresolved and now - _t_last < POSTPONE_S):
        return
    _report(now, TRAINING)
    _reset_window(now)


def _at_exit():
    """The script ends: an evaluation under way (the closing validation) still gets its
    window, and the training before it one too; a pass still not known is evaluation
    unless the loop trained after it.  Training still going is a partial window, dropped."""
    if not _on or _t_last is None:
        return
    try:
        while _unresolved:
            _settle_oldest()
        if _eval_since is not None:
            if not _eval_split:
                _end_training_window(_eval_since)
            _report(time.monotonic(), EVALUATION)
    except Exception:
        pass


def _patch_optimizer(module):
    global _step_handle, _note
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is None:
        _note = "no register_optimizer_step_post_hook (PyTorch < 2.0): optimizer steps are not counted"
        return
    _step_handle = register(_on_step)
    _hooks.append("optimizer_step")
    autograd = sys.modules.get("torch.autograd")
    backward = getattr(autograd, "backward", None)
    if autograd is not None and callable(backward) and not getattr(backward, "__gputui_probe__", False):
        autograd.backward = _wrap_backward(backward)  # type: ignore[attr-defined]  # torch's module, as the script loaded it
        _hooks.append("backward")
    module_class = getattr(sys.modules.get("torch.nn.modules.module"), "Module", None)  # loaded before the optimizer's module
    mode = getattr(module_class, "train", None)
    if module_class is not None and callable(mode) and not getattr(mode, "__gputui_probe__", False):
        module_class.train = _wrap_train(mode)
        _hooks.append("train_mode")


def _patch_dataloader(module):
    cls = module._BaseDataLoaderIter
    if getattr(cls.__next__, "__gputui_probe__", False):
        return
    cls.__next__ = _wrap_next(cls.__next__)
    cls.__init__ = _wrap_init(cls.__init__)
    _hooks.append("dataloader")
    if os.environ.get("GPUTUI_TUNE_LOADER") is not None:
        try:
            _tune_loaders(module)
        except Exception as exc:  # the trial's settings are not applied; the probe goes on
            _send(encode("probe_status", state="loader", pid=os.getpid(), error=_short(exc)))


def _tune_loaders(module):
    """A trial of ``gputui tune``: its settings into the training DataLoaders the script
    builds (``_gputui_tune``, beside this file, loaded only then)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_gputui_tune", os.path.join(os.path.dirname(os.path.realpath(__file__)), "_gputui_tune.py"))
    tune = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # the file is beside this one
    spec.loader.exec_module(tune)  # type: ignore[union-attr]
    settings, error = tune.wanted()
    if settings is None:
        _send(encode("probe_status", state="loader", pid=os.getpid(), error=error))
        return
    loader = module.DataLoader
    if getattr(loader.__init__, "__gputui_probe__", False):
        return

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def tell(**fields):
        frameworks = [name for name in ("lightning", "pytorch_lightning", "transformers", "accelerate", "timm") if name in sys.modules]
        _send(encode("probe_status", state="loader", pid=os.getpid(), cpus=cpus, frameworks=frameworks, **fields))

    loader.__init__ = tune.wrap_init(loader.__init__, module, settings, tell)
    _hooks.append("tune")


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
                    hooks=[h for h in ("optimizer_step", "backward", "dataloader", "train_mode", "tune") if h in _hooks],
                    note=_note,
                )
            )
    except Exception as exc:
        _off(exc)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
if _on:
    atexit.register(_at_exit)
