"""Stopping on a signal never deadlocks: gputui.run.signal_relay runs the stop outside the
signal handler.  The headless recorder once hung after SIGTERM (CI, 1 run in ~30): the
handler interrupted its main thread inside ``Queue.get`` and ``Session.stop`` then
waited for the queue's lock, held by that same thread."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

from tests.support.process import REPO

# The main thread holds a plain lock when the signal comes; stopping needs that lock.
HELD_LOCK = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    sys.path.insert(0, {repo!r})
    lock, stopped = threading.Lock(), threading.Event()

    def stop(signum):
        with lock:  # what Session.stop does with its queue's lock
            stopped.set()

    if sys.argv[1] == "relay":
        from gputui.run.signal_relay import SignalRelay
        SignalRelay([signal.SIGTERM], stop)
    else:  # the old way: the work inside the handler
        signal.signal(signal.SIGTERM, lambda signum, frame: stop(signum))
    with lock:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):  # the handler runs between these bytecodes, lock held
            time.sleep(0.001)
    print("stopped" if stopped.wait(5) else "not stopped")
    """
).format(repo=str(REPO))


def run_held_lock(mode: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run([sys.executable, "-c", HELD_LOCK, mode], capture_output=True, text=True, timeout=6)
    except subprocess.TimeoutExpired:
        return None  # deadlocked


def test_a_signal_while_the_main_thread_holds_the_stop_lock_still_stops():
    relayed = run_held_lock("relay")
    assert relayed is not None and relayed.stdout.strip() == "stopped", relayed
    assert run_held_lock("handler") is None  # the same with the work in the handler hangs: the test can tell


def test_the_relay_hands_each_signal_to_its_thread_and_puts_the_handlers_back():
    from gputui.run.signal_relay import SignalRelay

    before = signal.getsignal(signal.SIGUSR1)
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def on_signal(signum: int) -> None:
        seen.append((signum, threading.current_thread().name))
        done.set()

    relay = SignalRelay([signal.SIGUSR1], on_signal)
    try:
        signal.raise_signal(signal.SIGUSR1)
        assert done.wait(5)
        assert relay.received == [signal.SIGUSR1]
        assert seen == [(signal.SIGUSR1, "gputui-signals")]  # not the main thread
    finally:
        relay.close()
    assert signal.getsignal(signal.SIGUSR1) == before


def test_sighup_ignored_under_nohup_stays_ignored():
    from gputui.run.signal_relay import SignalRelay

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        relay = SignalRelay([signal.SIGHUP, signal.SIGUSR2], lambda signum: None)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        relay.close()
    finally:
        signal.signal(signal.SIGHUP, previous)
