"""``gputui tune``'s hand inside the user's process: one trial's data-loading settings,
put into the script's training DataLoaders as they are built, with no change to the
script.  ``_gputui_probe`` loads it when ``GPUTUI_TUNE_LOADER`` is set, and wraps
``torch.utils.data.DataLoader.__init__`` with :func:`wrap_init`.

``GPUTUI_TUNE_LOADER`` holds a JSON object with any of ``num_workers``, ``pin_memory``,
``persistent_workers`` and ``prefetch_factor``; ``{}`` changes nothing and only reports
each loader's own settings (the first trial's: the script as written).

Which loaders: a training loader is one that shuffles (``shuffle=True``, or a sampler
that draws at random: ``RandomSampler``, ``DistributedSampler(shuffle=True)``, the HF
Trainer's length-grouped sampler), which evaluation loaders never do, for metrics that
repeat.  Left alone, and said so:

- a loader that does not shuffle (taken for evaluation);
- an ``IterableDataset``'s loader: each worker runs the whole iterator unless the
  dataset shards itself, so more workers would change what the batches hold.

What a batch holds never changes: the same sampler, batch size, collate function and
order (torch keeps worker batches in order).  Random augmentations draw from each
worker's own generator, as they would with that many workers written in the script.

Each loader built is told to gputui in one ``probe_status`` line of state ``loader``:
whether it trained, the settings it was built with, and those it got.  Like the probe,
it never breaks the script: anything unexpected builds the loader as written.
"""

import functools
import inspect
import json
import os

ENV = "GPUTUI_TUNE_LOADER"
SETTINGS = {"num_workers": int, "pin_memory": bool, "persistent_workers": bool, "prefetch_factor": int}
DEFAULTS = {"num_workers": 0, "pin_memory": False, "persistent_workers": False, "prefetch_factor": None}
_TOLD_MAX = 16  # loaders told about; a script that builds one per step would flood the channel
_RANDOM_NAMES = ("Random", "Shuffl", "LengthGrouped")


def wanted():
    """The trial's settings from the environment: (settings, None), or (None, why not)."""
    text = os.environ.get(ENV)
    if text is None:
        return None, None
    try:
        value = json.loads(text)
    except ValueError:
        return None, f"{ENV} is not JSON"
    if not isinstance(value, dict):
        return None, f"{ENV} is not a JSON object"
    settings = {}
    for key, item in value.items():
        kind = SETTINGS.get(key)
        if kind is None:
            return None, f"{ENV}: unknown setting {key!r}"
        if item is not None and (type(item) is not kind or (kind is int and not item >= (0 if key == "num_workers" else 1))):  # type: ignore[operator]
            return None, f"{ENV}: {key} must be {kind.__name__}, got {item!r}"
        settings[key] = item
    return settings, None


def _draws_at_random(sampler):
    if sampler is None:
        return False
    if getattr(sampler, "shuffle", False) is True:  # DistributedSampler(shuffle=True)
        return True
    return any(any(name in cls.__name__ for name in _RANDOM_NAMES) for cls in type(sampler).__mro__)


def plan(arguments, module, settings):
    """(the settings to build with, or None to leave the loader alone; what it had; why)."""
    dataset = arguments.get("dataset")
    iterable = getattr(module, "IterableDataset", None)
    had = {key: arguments.get(key, default) for key, default in DEFAULTS.items()}
    if iterable is not None and isinstance(dataset, iterable):
        return None, had, "an IterableDataset: each worker would run the whole stream"
    batch_sampler = arguments.get("batch_sampler")
    training = bool(arguments.get("shuffle")) or _draws_at_random(arguments.get("sampler")) or _draws_at_random(getattr(batch_sampler, "sampler", None))
    if not training:
        return None, had, "does not shuffle: taken for evaluation"
    new = {**had, **settings}
    if not new["num_workers"]:  # torch refuses these without workers
        new["persistent_workers"], new["prefetch_factor"] = False, None
    return new, had, None


def wrap_init(original, module, settings, tell):
    """``DataLoader.__init__`` building training loaders with ``settings``; ``tell``
    sends one status line's fields."""
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return original
    told = [0]

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
            new, had, why = plan(bound.arguments, module, settings)
        except Exception:  # arguments torch itself will refuse: as written, and its error
            return original(self, *args, **kwargs)
        if new is not None:
            for key, value in new.items():
                if value != had[key] or key in bound.arguments:
                    bound.arguments[key] = value
            args, kwargs = bound.args[1:], bound.kwargs
        result = original(self, *args, **kwargs)
        if told[0] < _TOLD_MAX:
            told[0] += 1
            try:
                tell(training=new is not None, had=had, got=new, why=why, loader=type(self).__name__)
            except Exception:
                pass
        return result

    __init__.__gputui_probe__ = True  # type: ignore[attr-defined]
    return __init__
