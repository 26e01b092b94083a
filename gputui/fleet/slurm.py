"""The Slurm engine: ``srun --ntasks-per-node=1`` runs the node script once on every node
of the allocation (or of the one srun asks for, given ``-N``/``-w`` among the srun
options).  ``--label`` puts each task's number before its lines, which is how one
stream is split back into nodes; a node's line is printed as soon as its task ends.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from gputui.errors import UserError
from gputui.fleet.node import MARK
from gputui.fleet.results import NodeResult, node_result

_LABELLED = re.compile(r"\s*(\d+): ?(.*)")


def srun_argv(script: str, srun_options: Sequence[str]) -> list[str]:
    return ["srun", "--ntasks-per-node=1", "--label", *srun_options, "sh", "-c", script]


def check_over_srun(script: str, srun_options: Sequence[str], timeout: float, on_done: Callable[[NodeResult], None]) -> list[NodeResult]:
    """Run the script on every node through one srun; the results in task order."""
    began = time.monotonic()
    try:
        proc = subprocess.Popen(
            srun_argv(script, srun_options), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
        )
    except FileNotFoundError:
        raise UserError("srun: not found; --slurm runs srun, inside a Slurm allocation (salloc, sbatch) or on a login node") from None
    errors: dict[int, list[str]] = defaultdict(list)
    untagged: list[str] = []
    reader = threading.Thread(target=_read_labelled, args=(proc.stderr, errors, untagged), daemon=True)
    reader.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    outputs: dict[int, list[str]] = defaultdict(list)
    results: dict[int, NodeResult] = {}
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            match = _LABELLED.fullmatch(raw.rstrip("\n"))
            if not match:
                continue
            task, line = int(match.group(1)), match.group(2)
            outputs[task].append(line)
            if line.startswith(f"{MARK} exit "):  # this node is done: say so now
                results[task] = _task_result(task, outputs[task], errors[task], 0, time.monotonic() - began)
                on_done(results[task])
        returncode = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    timed_out = returncode < 0 and time.monotonic() - began >= timeout
    for task in sorted(set(outputs) - set(results)):  # tasks that never got to the end
        results[task] = _task_result(task, outputs[task], errors[task], None if timed_out else returncode, time.monotonic() - began)
        on_done(results[task])
    if not results:
        why = (untagged or [line for lines in errors.values() for line in lines] or [f"exit status {returncode}"])[-1]
        raise UserError(f"srun: ran no task ({why.strip()[:300]})")
    return [results[task] for task in sorted(results)]


def _task_result(task: int, lines: list[str], errors: list[str], returncode: int | None, seconds: float) -> NodeResult:
    result = node_result(f"task {task}", returncode, "\n".join(lines) + "\n", "\n".join(errors), seconds)
    if result.hostname:  # Slurm's name for the node: what sinfo and scontrol call it
        result.node = result.hostname
    return result


def _read_labelled(stream, errors: dict[int, list[str]], untagged: list[str]) -> None:
    for raw in stream:
        match = _LABELLED.fullmatch(raw.rstrip("\n"))
        if match:
            errors[int(match.group(1))].append(match.group(2))
        else:
            untagged.append(raw.rstrip("\n"))  # srun's own messages
