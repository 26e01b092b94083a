"""A run and everything it writes, in whichever process owns it.

:func:`record_run` is the one way a recorded run goes: its Session, its --record file and
history copy, its entry in the live folder (so ``gputui attach`` and ``gputui stop`` find
it), its signals.  The headless recorder calls it in the foreground; a detached run (the
dashboard's runs, ``--detach``) calls it in a process of its own (:func:`main`, started
by :mod:`gputui.live.spawn`), with no terminal, so that closing the terminal that asked
for it stops nothing.

Signals: SIGINT and SIGTERM stop the run ("received SIGTERM"); SIGUSR1 stops it for the
reason a viewer wrote (gputui.live.stop_request); SIGHUP is ignored: a closed terminal is
not a request to stop, so a foreground run outlives it too, silently (its progress lines
have nowhere to go) but attachable.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pickle
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.console import say
from gputui.errors import UserError
from gputui.fmt import printable
from gputui.live.registry import LiveRun, Registry, process_start_time
from gputui.live.stop_request import STOP_SIGNAL, take_stop_request
from gputui.live.wiring import RunWiring
from gputui.record.history import label_for, new_recorder
from gputui.record.observer import Observer
from gputui.record.recorder import Recorder
from gputui.record.schema import Header, Summary
from gputui.session.options import RunOptions

if TYPE_CHECKING:
    from gputui.metrics.server import MetricsServer
    from gputui.record.schema import Baseline
    from gputui.session.session import Session

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C and kill stop a run; SIGHUP does not


@dataclass(frozen=True)
class HostSpec:
    """What a run is asked to do, whichever process runs it (pickled to a detached one)."""

    options: RunOptions  # what to run, checked (its preset, --duration, ...)
    wiring: RunWiring  # where it is written and exported (--record FILE, the history, --serve-metrics)
    progress: bool = True  # gputui's live line and messages (a foreground run, not --quiet); the summary prints either way
    detached: bool = False  # it runs apart from any terminal
    pass_output: bool = True  # a foreground run's output and summary on this terminal (not a tune's trials: in their recordings)


@dataclass
class RunResult:
    summary: Summary | None  # None when a --baseline-run's twin was interrupted
    signals: list[int]  # the stopping signals received (SIGINT, SIGTERM), first first
    record_error: str | None = None  # the --record file could not be written: the run was stopped


ReadyCallback = Callable[[LiveRun], None]


def record_run(spec: HostSpec, ready: ReadyCallback | None = None, observe: Callable[[Session], Observer] | None = None) -> RunResult:
    """Run what ``spec`` asks, recorded and listed as live, until it ends or is stopped.
    ``ready`` hears the run's entry once its header is written; ``observe`` makes an
    observer of the caller's from the session (one that may stop it)."""
    options = spec.options
    relay = _StopRelay()
    metrics = spec.wiring.metrics(announce=say if spec.progress else None)
    try:
        baseline = None  # --baseline FILE's comes with the options
        if options.baseline_run:
            baseline = _measure_baseline(options, relay, progress=spec.progress)
            if relay.received:
                return RunResult(None, relay.received)
        return _run_listed(spec, relay, metrics, baseline, ready, observe)
    finally:
        relay.close()
        if metrics is not None:
            metrics.close()


def _run_listed(
    spec: HostSpec,
    relay: _StopRelay,
    metrics: MetricsServer | None,
    baseline: Baseline | None,
    ready: ReadyCallback | None,
    observe: Callable[[Session], Observer] | None = None,
) -> RunResult:
    from gputui.session.assemble import SessionParts
    from gputui.session.pass_through import PassThrough
    from gputui.session.progress import PRINT_EVERY_OFF_TERMINAL_S, PRINT_EVERY_S, ProgressPrinter

    options = spec.options
    preset = options.preset
    session = SessionParts().build(options.session_config(preset, attach_pid=options.attach_pid, baseline=baseline, cap_watching=True))
    notes: list[str] = []

    def warn(text: str) -> None:  # on stderr even with --quiet (a detached run's: its log)
        notes.append(text)
        say(f"gputui: warning: {printable(text)}")

    label = label_for(preset.name if preset else None, options.attach_pid)
    recording, kept = spec.wiring.recorders(label, warn=warn, on_record_error=lambda _text: session.stop("cannot write the recording"))
    registry = Registry()
    followed = kept or _private_copy(registry, label, warn)
    recorders = [r for r in (recording, kept, followed) if r is not None]
    if followed is None and spec.detached:  # no terminal and nothing to attach to: it would run unseen
        for recorder in recorders:
            recorder.close()
        raise UserError(notes[-1])
    for recorder in dict.fromkeys(recorders):
        session.add_observer(recorder)
    face = None
    if not spec.detached and spec.pass_output:  # the user's terminal: the command's output passes through
        face = PassThrough()
        session.pass_output_to(face)
        face.on_resize = session.resize_terminal
        every = PRINT_EVERY_S if face.is_terminal else PRINT_EVERY_OFF_TERMINAL_S
        session.add_observer(ProgressPrinter(session.summary_builder, face=face, live=spec.progress, every_s=every))
    if metrics is not None:
        session.add_observer(metrics.live)
    if observe is not None:
        session.add_observer(observe(session))
    relay.point_at(session)

    def entry(path: Path) -> LiveRun:
        return LiveRun(
            name=path.name.removesuffix(".jsonl"),
            pid=os.getpid(),
            pid_started=process_start_time(os.getpid()) or 0.0,
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            label=label,
            recording=path.absolute(),  # a viewer may be in any folder
            record_path=recording.path.absolute() if recording is not None else None,
            kept_path=kept.path.absolute() if kept is not None else None,
            detached=spec.detached,
            notes=tuple(notes),
        )

    listing = _Listing(registry, relay, (lambda: entry(followed.path)) if followed is not None else None, ready, warn)
    session.add_observer(listing)
    if face is not None:
        face.start()
    try:
        summary = session.run()
    finally:
        if face is not None:
            face.close()
        for recorder in dict.fromkeys(recorders):
            recorder.close()
        listing.unlist()
    return RunResult(summary, relay.received, recording.error if recording is not None else None)


def _private_copy(registry: Registry, label: str, warn: Callable[[str], None]) -> Recorder | None:
    """Without a history copy, viewers follow a copy in the live folder, gone with the run."""
    try:
        return new_recorder(registry.prepare(), label)
    except (OSError, UserError) as exc:
        warn(unattachable(registry, exc))
        return None


def unattachable(registry: Registry, exc: OSError | UserError) -> str:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"this run cannot be attached to (gputui attach): cannot write to {registry.folder} ({why})"


class _Listing(Observer):
    """Lists the run as live once its header is written (a viewer then finds a recording
    it can read from its first line), tells ``ready``, and takes it off the list at the end."""

    def __init__(
        self,
        registry: Registry,
        relay: _StopRelay,
        entry: Callable[[], LiveRun] | None,
        ready: ReadyCallback | None,
        warn: Callable[[str], None],
    ) -> None:
        self._registry, self._relay, self._entry, self._ready, self._warn = registry, relay, entry, ready, warn
        self.live: LiveRun | None = None

    def on_header(self, header: Header) -> None:
        if self.live is not None or self._entry is None:  # None: nothing a viewer could follow (said when the copy could not be made)
            return
        live = self._entry()
        try:
            self._registry.add(live)
        except OSError as exc:
            self._warn(unattachable(self._registry, exc))
        else:
            self.live = live
            self._relay.listed(self._registry, live)
        if self._ready is not None:
            self._ready(live)

    def unlist(self) -> None:
        if self.live is not None:
            self._registry.remove(self.live)


class _StopRelay:
    """The process's stopping signals, pointed at whichever session runs now (a
    --baseline-run's twin, then the run).  SIGHUP is ignored for the process's life."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._registry: Registry | None = None
        self._live: LiveRun | None = None
        self.received: list[int] = []
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self._relay = RunWiring.stop_signals([*STOP_SIGNALS, STOP_SIGNAL], self._on_signal)

    def point_at(self, session: Session) -> None:
        self._session = session

    def listed(self, registry: Registry, live: LiveRun) -> None:
        """Stop requests for ``live`` come through ``registry`` from now on."""
        self._registry, self._live = registry, live

    def _on_signal(self, signum: int) -> None:
        if signum == STOP_SIGNAL:
            asked = take_stop_request(self._registry, self._live.name) if self._registry and self._live else None
            reason = asked or f"received {signal.Signals(signum).name}"
        else:
            self.received.append(signum)
            reason = f"received {signal.Signals(signum).name}"
        if self._session is not None:
            self._session.stop(reason)

    def close(self) -> None:
        self._relay.close()


def _measure_baseline(options: RunOptions, relay: _StopRelay, *, progress: bool) -> Baseline | None:
    """--baseline-run: the preset's one-GPU twin, run before the real run."""
    from gputui.session.assemble import SessionParts
    from gputui.session.baseline import THIS_SESSION, baseline_from_summary, one_gpu_twin
    from gputui.session.progress import ProgressPrinter

    assert options.preset is not None  # the command line made sure of it (cli.run_options)
    twin = one_gpu_twin(options.preset)
    if progress:
        say(f"gputui: measuring the one-GPU baseline first: {twin.name}")
    session = SessionParts().build(options.session_config(twin))
    if progress:
        session.add_observer(ProgressPrinter(session.summary_builder))
    relay.point_at(session)
    summary = session.run()
    if relay.received:
        return None
    return baseline_from_summary(summary, THIS_SESSION, "--baseline-run")


# --- A detached run's own process: ``python -m gputui.live`` ------------------------------

READY = "ready"
FAILED = "error"


def main() -> int:
    """Read a pickled :class:`HostSpec` on stdin, leave the spawner's process (it waits
    only for one line on stdout: ``ready`` and the run's entry, or ``error`` and why),
    and run it with no terminal, writing gputui's own messages to a log in the live folder."""
    try:
        spec = pickle.load(sys.stdin.buffer)  # from the spawner, the same user's gputui, over a pipe
    except (EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        spec = None
    if not isinstance(spec, HostSpec):
        print("gputui.live: expected a run on stdin; gputui starts this itself (gputui --detach, or a run in the dashboard)", file=sys.stderr)
        return 2
    if os.fork() > 0:  # the spawner reaps its child at once; this process is nobody's to wait for
        os._exit(0)
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    log = _leave_the_terminal(Registry())
    answered = False

    def say_ready(live: LiveRun) -> None:
        nonlocal answered
        answered = True
        try:
            answer.write(f"{READY} {json.dumps(live.to_json())}\n")
            answer.close()
        except OSError:
            pass  # the spawner stopped waiting: the run goes on, listed as live

    try:
        record_run(dataclasses.replace(spec, progress=False, detached=True), ready=say_ready)
    except UserError as exc:
        if not answered:
            answer.write(f"{FAILED} {exc}\n")
        return exc.exit_code
    finally:
        if not answer.closed:
            answer.close()
        _drop_if_empty(log)
    return 0


def _leave_the_terminal(registry: Registry) -> Path | None:
    """stdin from /dev/null; stdout and stderr (tracebacks of threads, a library's
    warnings) to a log of this process in the live folder (its path), or /dev/null."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    out, path = devnull, None
    try:
        path = registry.prepare() / f"host-{os.getpid()}.log"
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError:
        path = None
    os.dup2(out, 1)
    os.dup2(out, 2)
    for fd in {devnull, out}:
        os.close(fd)
    return path


def _drop_if_empty(log: Path | None) -> None:
    """A log with nothing in it says nothing: a run that went well leaves none."""
    try:
        if log is not None and log.stat().st_size == 0:
            log.unlink()
    except OSError:
        pass
