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
        if not _HOST.fullmatch(host):
            raise UserError(f"{path}:{number}: {host!r}: expected an ssh destination (host, user@host, an alias of ~/.ssh/config)")
        if host in hosts:
            raise UserError(f"{path}:{number}: {host!r} is listed twice")
        hosts.append(host)
    if not hosts:
        raise UserError(f"{path}: no hosts in it (one a line; # starts a comment)")
    return hosts


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
