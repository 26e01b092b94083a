"""The SSH engine: the system ``ssh`` to each host of a hostfile, a few at a time.

Batch mode (a host that asks for a password is unreachable, not a hang), a connect
timeout, and a timeout for the whole check; keys, jump hosts and user names come from
the user's own ``~/.ssh/config`` as for any ssh.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from gputui.errors import UserError
from gputui.fleet.results import NodeResult, node_result
from gputui.text_files import read_text_file

# What a hostfile's host may be: an ssh destination (alias, name, address, user@host,
# [v6]:port).  Nothing that starts with "-", which ssh would read as an option.
_HOST = re.compile(r"[A-Za-z0-9_.@\[\]:%][A-Za-z0-9_.@\[\]:%-]*")
MAX_HOSTNAME = 253  # DNS's limit on a whole name
MAX_USER = 32  # useradd's limit on a user name
MAX_DESTINATION = MAX_USER + 1 + MAX_HOSTNAME + len("[]:65535")
_SHOWN = 60  # characters of a refused host an error shows (quoted and escaped)


def read_hostfile(path: Path) -> list[str]:
    """The hosts of a hostfile: the first word of each line, ``#`` starting a comment
    (MPI's ``host slots=8`` lines read too).  UserError naming the line otherwise."""
    try:
        text = read_text_file(path, "hostfile")
    except FileNotFoundError:
        raise UserError(f"{path}: no such hostfile") from None
    hosts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        host = words[0]
        where = f"{path}:{number}: {_shown(host)}"
        if not _HOST.fullmatch(host):
            raise UserError(f"{where}: expected an ssh destination (host, user@host, an alias of ~/.ssh/config)")
        user, _, name = host.rpartition("@")
        name = re.sub(r":\d*$", "", name) if not name.startswith("[") else name.partition("]")[0][1:]
        if len(name) > MAX_HOSTNAME:
            raise UserError(f"{where}: a host name of {len(name)} characters; expected at most {MAX_HOSTNAME} (DNS's limit)")
        if len(user) > MAX_USER:
            raise UserError(f"{where}: a user name of {len(user)} characters; expected at most {MAX_USER}")
        if len(host) > MAX_DESTINATION:
            raise UserError(f"{where}: {len(host)} characters; expected an ssh destination of at most {MAX_DESTINATION}")
        if host in hosts:
            raise UserError(f"{where} is listed twice")
        hosts.append(host)
    if not hosts:
        raise UserError(f"{path}: no hosts in it (one a line; # starts a comment)")
    return hosts


def _shown(host: str) -> str:
    """A hostfile's host for an error line: quoted, and cut when long."""
    return repr(host) if len(host) <= _SHOWN else repr(host[:_SHOWN]) + "…"  # repr: escapes what a terminal would act on


def ssh_argv(host: str, script: str, connect_timeout: float) -> list[str]:
    return [
        "ssh",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={max(1, round(connect_timeout))}",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=4",
        "-T",
        "--",
        host,
        "sh -c " + shlex.quote(script),
    ]  # fmt: skip


def check_over_ssh(host: str, script: str, connect_timeout: float, timeout: float) -> NodeResult:
    began = time.monotonic()
    try:
        done = subprocess.run(
            ssh_argv(host, script, connect_timeout), capture_output=True, text=True, errors="replace", timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise UserError("ssh: not found; the SSH engine runs the system ssh (install openssh-client)") from None
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return node_result(host, None, out, err, time.monotonic() - began)
    return node_result(host, done.returncode, done.stdout, done.stderr, time.monotonic() - began)


def run_hosts(hosts: Sequence[str], check: Callable[[str], NodeResult], parallel: int, on_done: Callable[[NodeResult], None]) -> list[NodeResult]:
    """``check`` each host, ``parallel`` at a time; ``on_done`` as each finishes; the
    results in the hostfile's order."""
    results: dict[str, NodeResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="fleet-ssh") as pool:
        futures = {pool.submit(check, host): host for host in hosts}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            on_done(result)
    return [results[host] for host in hosts]
