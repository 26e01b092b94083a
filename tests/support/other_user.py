"""A second local user, made for the test that asks for it: a throw-away system account
(``useradd --system``, no home, a group of its own) with a name of its own, removed when
the test ends, and commands run as it through setpriv.  So what such a test shows holds
for any other user of the machine, not only for ``nobody``, whose uid some systems give
files to.  Needs root, useradd and setpriv (util-linux); a test that asks for one is
skipped, saying which is missing, without them.

Import the fixture into a test module (``from tests.support.other_user import
other_user``)."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# useradd and userdel live in sbin, which a non-login shell's PATH may lack.
_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
USERADD = shutil.which("useradd", path=_PATH)
USERDEL = shutil.which("userdel", path=_PATH)
GROUPDEL = shutil.which("groupdel", path=_PATH)
SETPRIV = shutil.which("setpriv", path=_PATH)
# Parallel test workers add and remove users at once: the shadow tools refuse while
# another holds /etc/passwd's lock ("cannot lock /etc/passwd; try again later").
LOCK_WAIT_S = 30.0


@dataclass(frozen=True)
class OtherUser:
    name: str
    uid: int
    gid: int

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """``argv`` run as this user (its uid, its group alone), its output captured."""
        assert SETPRIV is not None
        as_user = [SETPRIV, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *argv]
        return subprocess.run(as_user, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def why_no_other_user() -> str | None:
    """Why this machine cannot make a user for a test, or None."""
    if os.geteuid() != 0:
        return "needs root to make a second local user (useradd) and act as it (setpriv)"
    missing = [name for name, path in (("useradd", USERADD), ("userdel", USERDEL), ("setpriv", SETPRIV)) if path is None]
    return f"needs {' and '.join(missing)} to make a second local user and act as it" if missing else None


def _shadow_tool(argv: list[str]) -> subprocess.CompletedProcess:
    """A shadow tool run to its end, tried again while another holds the password file's lock."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode == 0 or "lock" not in done.stderr.lower() or time.monotonic() > deadline:
            return done
        time.sleep(0.1)


@pytest.fixture
def other_user() -> Iterator[OtherUser]:
    """A user of the machine made for this test, removed (with its group) after it."""
    reason = why_no_other_user()
    if reason is not None:
        pytest.skip(reason)
    assert USERADD is not None and USERDEL is not None
    name = f"gputui-test-{secrets.token_hex(4)}"  # 20 characters: within useradd's 32
    made = _shadow_tool([USERADD, "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name])
    assert made.returncode == 0, f"useradd {name}: {made.stderr.strip()}"
    try:
        entry = pwd.getpwnam(name)
        user = OtherUser(name, entry.pw_uid, entry.pw_gid)
        assert user.uid != os.getuid() and user.uid != 0
        yield user
    finally:
        removed = _shadow_tool([USERDEL, name])
        if GROUPDEL is not None:  # userdel removes the user's own group where the system says so; else it is left
            _shadow_tool([GROUPDEL, name])
        assert removed.returncode == 0, f"userdel {name}: {removed.stderr.strip()}"
