"""Another user of the machine can neither list, attach to nor stop someone's run, even
knowing where its files are, on a box whose homes others may walk into (Debian's
``useradd -m`` under UMASK 022 makes them 0755).  The run is this test's (root's); the
other user is a second local user made for the test (tests.support.other_user), through
setpriv, running this checkout's gputui.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.support.live import live_runs, stop_leftovers, wait_live, wait_readings, write_loop
from tests.support.other_user import OtherUser, other_user  # noqa: F401  (other_user: the fixture)
from tests.support.process import REPO


def python_for(user: OtherUser, env: dict[str, str], cwd: Path) -> str | None:
    """A Python the other user can run that imports gputui's dependencies: this one, or
    the system's of the same version (a venv's interpreter may sit under root's 0700 home)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/{version}", shutil.which(version)):
        if python and user.run([python, "-c", "import psutil, textual, gputui"], env=env, cwd=cwd).returncode == 0:
            return python
    return None


@pytest.fixture
def shared_box():
    """A folder as a shared machine's /home is: others may walk in, not write."""
    root = Path(tempfile.mkdtemp(prefix="gputui-shared-box-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_another_user_cannot_list_attach_to_or_stop_a_run(shared_box, tmp_path, other_user):  # noqa: F811
    home = shared_box / "owner"
    state = home / ".local" / "state"
    state.mkdir(parents=True)
    for folder in (home, home / ".local", state):
        folder.chmod(0o755)
    code = shared_box / "code"
    shutil.copytree(REPO / "gputui", code / "gputui", ignore=shutil.ignore_patterns("__pycache__"))  # this checkout, readable by all
    site = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    owner_env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(home / ".config"), "PYTHONPATH": str(REPO)}
    write_loop(home)
    started = subprocess.run(
        [sys.executable, "-m", "gputui", "--detach", "--", sys.executable, "loop.py"], env=owner_env, cwd=home, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stderr
    try:
        live = wait_live(state)
        assert live.kept_path is not None
        wait_readings(live.kept_path, 2)
        intruder = shared_box / "intruder"
        intruder.mkdir(mode=0o777)
        intruder.chmod(0o777)
        # The other user points gputui at the owner's folders: it knows where they are.
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(intruder),
            "XDG_CONFIG_HOME": str(intruder / "config"),
            "XDG_CACHE_HOME": str(intruder / "cache"),
            "XDG_STATE_HOME": str(state),
            "PYTHONPATH": os.pathsep.join([str(code), site]),
        }
        python = python_for(other_user, env, intruder)
        if python is None:
            pytest.skip("no Python that another user can run with gputui's dependencies (a venv under a private home, and no system Python of this version)")

        def gputui(*args: str) -> subprocess.CompletedProcess:
            return other_user.run([python, "-m", "gputui", *args], env=env, cwd=intruder)

        listed = gputui("runs")
        assert live.name not in listed.stdout + listed.stderr and "live" not in listed.stdout
        for attempt in (gputui("attach"), gputui("attach", live.name), gputui("attach", str(live.kept_path))):
            assert attempt.returncode != 0 and "no run is live" in attempt.stderr, attempt
        for attempt in (gputui("stop", live.name), gputui("stop", str(live.pid))):
            assert attempt.returncode == 2 and "no run is live" in attempt.stderr, attempt
        replayed = gputui("report", str(live.kept_path))
        assert replayed.returncode == 2 and "Permission denied" in replayed.stderr, replayed
        # Past gputui, at the files and the process themselves:
        entry = state / "gputui" / "live" / f"{live.name}.json"
        for argv in (["ls", str(entry.parent)], ["cat", str(entry)], ["cat", str(live.kept_path)], ["touch", str(entry.parent / f"{live.name}.stop")]):
            refused = other_user.run(argv, env=env, cwd=intruder)
            assert refused.returncode != 0 and "Permission denied" in refused.stderr, (argv, refused)
        for sig in ("USR1", "TERM", "KILL"):
            refused = other_user.run(["kill", f"-{sig}", str(live.pid)], env=env, cwd=intruder)
            assert refused.returncode != 0 and "not permitted" in refused.stderr, (sig, refused)
        assert [run.name for run in live_runs(state)] == [live.name] and live.alive()  # untouched
    finally:
        left = stop_leftovers(state)
    assert [run.name for run in left] == [live.name]  # the owner stops it: it was still going
