"""``gputui -- CMD ...``: any command run as a preset made on the spot, named after the
script it runs (``train.py``, ``nanogpt.train``) so the history and the dashboard read
like the user's own words."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from gputui.errors import UserError
from gputui.presets.preset import Preset
from gputui.record.redact import redact_argv

SOURCE = Path("(command line)")
# Programs that start the real job: the name comes from what they start.
_LAUNCHERS = re.compile(r"(python[0-9.]*|pypy[0-9.]*|torchrun|accelerate|launch|deepspeed|env|uv|run|poetry|pipenv|conda|srun|mpirun|nohup|time|exec)$")
_SCRIPT = re.compile(r".+\.(py|sh|bash|ipynb)$")
NAME_MAX = 60


def command_name(argv: list[str]) -> str:
    """A readable name for a command: its script's file name, a ``-m`` module, or the
    program's own name.  ``sh -c "python train.py"`` is named from the command it runs."""
    if len(argv) > 2 and os.path.basename(argv[0]) in ("sh", "bash", "dash", "zsh") and argv[1] == "-c":
        try:
            inner = shlex.split(argv[2])
        except ValueError:
            inner = []
        if inner:
            return command_name(inner)
    words = iter(argv)
    for word in words:
        base = os.path.basename(word)
        if word == "-m":
            module = next(words, "")
            if module and module not in ("torch.distributed.run", "torch.distributed.launch"):
                return module[:NAME_MAX]
        elif _SCRIPT.match(base):
            return base[:NAME_MAX]
    first = os.path.basename(argv[0]) if argv else "command"
    if _LAUNCHERS.match(first):
        for word in argv[1:]:
            if not word.startswith("-") and "=" not in word and not _LAUNCHERS.match(os.path.basename(word)):
                return os.path.basename(word)[:NAME_MAX] or first
    return first[:NAME_MAX] or "command"


def command_preset(argv: list[str], presets: Mapping[str, Preset], *, batch_size: int | None = None, probe: bool | None = None) -> Preset:
    """The preset that runs ``argv``; its name is unique among ``presets``.  ``probe``:
    None for on when ``argv`` runs Python, False for off (``--no-probe``)."""
    if not argv:
        raise UserError("--: expected a command after it, e.g. gputui -- python train.py")
    if any("\0" in word for word in argv):
        raise UserError("--: a command argument holds a NUL character, which no program can receive")
    if probe is None:
        from gputui.probe import is_python_command

        probe = is_python_command(argv)  # on by default where it can work
    shown = redact_argv(argv)  # the name and the description are stored and shown: no secrets in them
    name = command_name(shown)
    base, n = name, 2
    while name in presets:
        name = f"{base} ({n})"
        n += 1
    return Preset(
        name=name,
        source=SOURCE,
        description=" ".join(shown)[:200],
        command=tuple(argv),
        batch_size_hint=batch_size,
        probe=probe,
    )
