"""Real clusters on this one machine for the fleet tests (issue 24).

``ssh_hosts``: a private sshd on 127.0.0.1 with its own host key and a generated client
key, and an ssh client config naming two hosts: ``node-a`` (that sshd) and ``node-down``
(a port nothing listens on).  OpenSSH reads ``~/.ssh/config`` from the passwd entry, not
from ``$HOME``, so ``env()`` also puts an ``ssh`` first on PATH that passes ``-F`` with
the fixture's config: the real ssh, told where its config is.

``slurm_cluster``: munged, slurmctld and slurmd from Debian's packages for one node named
after ``hostname -s``, with every file (munge key and socket, slurm.conf, state, spool,
logs) in a temporary folder and ports of their own, so nothing under /etc is touched
and two test sessions do not meet.  ``env()`` carries ``SLURM_CONF`` for srun, sinfo and
scontrol.

Import the fixtures into a test module (``from tests.support.cluster import ssh_hosts``).
Each skips, saying why, where its programs or root are missing, or (slurm) where the
daemons do not come up; every daemon is stopped with its whole process group.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.support.isolation import user_folders
from tests.support.process import REPO

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
LOG_TAIL_CHARS = 1500
SLURM_PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "scontrol", "scancel")
SSH_PROGRAMS = ("sshd", "ssh", "ssh-keygen")
DAEMON_TAG_VARIABLE = "GPUTUI_TEST_DAEMON"
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start as root without it (systemd makes it)


# --- processes -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_programs(names: tuple[str, ...], apt_packages: str) -> dict[str, str]:
    """name -> path of each program (sbin included: sshd, slurmd), or skip the test."""
    search_path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    found = {name: shutil.which(name, path=search_path) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (Debian: apt-get install {apt_packages})")
    return {name: path for name, path in found.items() if path}


@dataclass
class Daemon:
    """A daemon run in the foreground in a process group of its own, output to ``log``."""

    name: str
    process: subprocess.Popen
    log: Path
    tag: str  # in the environment of the daemon and of every process it starts

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError as exc:
            text = f"(no log: {exc})"
        return f"--- {self.name} ({self.log}) ---\n{text[-LOG_TAIL_CHARS:]}"

    def stop(self) -> None:
        """SIGTERM to the whole group, then SIGKILL to whatever is left: the leader after
        the grace, and what it started in sessions of their own (sshd's connections,
        slurmd's slurmstepd), found by the tag they inherited."""
        _signal_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_GRACE_S)
        for process in _processes_tagged(self.tag):
            with contextlib.suppress(psutil.Error):
                process.kill()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is gone already


def _processes_tagged(tag: str) -> list[psutil.Process]:
    tagged = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(DAEMON_TAG_VARIABLE) == tag:
                tagged.append(process)
        except psutil.Error:
            continue  # gone, or not ours to read
    return tagged


def start_daemon(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None, tag: str | None = None) -> Daemon:
    log = log_dir / f"{name}.log"
    tag = tag or uuid.uuid4().hex
    env = {**(env or os.environ), DAEMON_TAG_VARIABLE: tag}
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return Daemon(name, process, log, tag)


def stop_all(daemons: list[Daemon]) -> None:
    for daemon in reversed(daemons):  # the last started depends on the earlier ones
        daemon.stop()


def wait_for_daemons(ready: Callable[[], bool], daemons: list[Daemon], timeout: float = START_TIMEOUT_S) -> str | None:
    """None once ``ready()``; otherwise why not (a daemon died, or time ran out) with every log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [d.name for d in daemons if not d.running()]
        if dead:
            return f"{', '.join(dead)} exited\n" + "\n".join(d.log_tail() for d in daemons)
        if ready():
            return None
        time.sleep(0.2)
    return f"not ready within {timeout:.0f} s\n" + "\n".join(d.log_tail() for d in daemons)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- ssh -----------------------------------------------------------------------------


@dataclass
class SshHosts:
    home: Path  # the HOME to give the process that runs ssh
    config: Path  # HOME/.ssh/config
    bin_dir: Path  # holds the ssh that reads ``config`` (see the module's docstring)
    remote_user_root: Path  # the remote gputui's user folders
    hosts: list[str] = field(default_factory=lambda: ["node-a", "node-down"])

    def env(self) -> dict[str, str]:
        """os.environ with this HOME, and this ssh first on PATH."""
        return {**os.environ, "HOME": str(self.home), "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def remote_gputui(self) -> str:
        """A ``--remote-gputui`` command: this checkout's gputui under this Python, with a
        user of its own (the remote shell starts with the real user's HOME)."""
        entries = [str(REPO), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        pythonpath = os.pathsep.join(dict.fromkeys(filter(None, entries)))
        assignments = [f"{name}={value}" for name, value in {"PYTHONPATH": pythonpath, **user_folders(self.remote_user_root)}.items()]
        return shlex.join(["env", *assignments, sys.executable, "-m", "gputui"])


def _generate_key(ssh_keygen: str, path: Path) -> None:
    subprocess.run([ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "gputui-test", "-f", str(path)], check=True, capture_output=True, timeout=30)


def _write_sshd_config(folder: Path, port: int, tag: str) -> Path:
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {folder / 'host_key'}\n"
        f"PidFile {folder / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "UsePAM no\n"
        "PermitRootLogin prohibit-password\n"  # CI runs the tests as root
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "StrictModes no\n"  # tmp_path's owner and modes are pytest's business
        "PrintMotd no\n"
        f"SetEnv {DAEMON_TAG_VARIABLE}={tag}\n"  # sessions start with a fresh environment: tag them for stop()
    )
    return config


def _write_client_config(home: Path, user: str, port: int, identity: Path) -> Path:
    common = f"  HostName 127.0.0.1\n  User {user}\n  IdentityFile {identity}\n  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 10\n"
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    config = ssh_dir / "config"
    config.write_text(f"Host node-a\n  Port {port}\n{common}\nHost node-down\n  Port {free_port()}\n{common}")
    return config


def _write_ssh_wrapper(bin_dir: Path, ssh: str, config: Path) -> None:
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(
        f'#!/bin/sh\n# OpenSSH ignores $HOME for ~/.ssh/config: name the test\'s config.\nexec {shlex.quote(ssh)} -F {shlex.quote(str(config))} "$@"\n'
    )
    wrapper.chmod(0o755)


@pytest.fixture
def ssh_hosts(tmp_path: Path) -> Iterator[SshHosts]:
    """node-a (a private sshd on 127.0.0.1) and node-down (nothing listens): run ssh with
    ``env()``, and gputui there with ``remote_gputui()``."""
    programs = find_programs(SSH_PROGRAMS, "openssh-server openssh-client")
    if os.geteuid() == 0:
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    folder = tmp_path / "sshd"
    folder.mkdir()
    _generate_key(programs["ssh-keygen"], folder / "host_key")
    _generate_key(programs["ssh-keygen"], folder / "client_key")
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = free_port()
    tag = uuid.uuid4().hex
    sshd_config = _write_sshd_config(folder, port, tag)
    # sshd insists on an absolute path to itself (it re-executes itself per connection)
    daemon = start_daemon("sshd", [os.path.abspath(programs["sshd"]), "-D", "-e", "-f", str(sshd_config)], folder, tag=tag)
    try:
        why_not = wait_for_daemons(lambda: port_open(port), [daemon])
        if why_not:
            pytest.skip(f"sshd did not start: {why_not}")
        home = tmp_path / "ssh-home"
        user = pwd.getpwuid(os.getuid()).pw_name
        client_config = _write_client_config(home, user, port, folder / "client_key")
        _write_ssh_wrapper(home / "bin", programs["ssh"], client_config)
        yield SshHosts(home=home, config=client_config, bin_dir=home / "bin", remote_user_root=tmp_path / "remote-user")
    finally:
        daemon.stop()


# --- slurm ---------------------------------------------------------------------------


@dataclass
class SlurmCluster:
    node: str
    conf: Path
    folder: Path
    daemons: list[Daemon]

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, argv: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env or self.env(), capture_output=True, text=True, timeout=timeout)

    def node_state(self) -> str:
        """sinfo's ``NODE STATE REASON`` line for the node, e.g. ``vm drained gputui: host.shm``."""
        return self.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%N %T %E"]).stdout.strip()

    def resume(self) -> None:
        self.run(["scontrol", "update", f"nodename={self.node}", "state=resume"])

    def cancel_jobs(self) -> None:
        """Cancel every job, and give slurmd the time to end their steps: a slurmstepd
        lives in a session of its own, and its tasks in process groups of their own."""
        self.run(["scancel", "--partition=debug"])
        deadline = time.monotonic() + STOP_GRACE_S
        while self.run(["squeue", "-h"]).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(d.log_tail() for d in self.daemons)


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def _slurm_conf(folder: Path, node: str, munge_socket: Path) -> str:
    """The least slurm.conf that runs jobs here: no cgroups, no accounting, no MPI, root."""
    return "\n".join(
        [
            "ClusterName=gputuitest",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={folder / 'state'}",
            f"SlurmdSpoolDir={folder / 'spool'}",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={folder / 'slurmd.pid'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={len(os.sched_getaffinity(0))} State=UNKNOWN",
            f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _start_munged(programs: dict[str, str], folder: Path) -> tuple[Daemon, Path]:
    key, munge_socket = folder / "munge.key", folder / "munge.socket"
    subprocess.run([programs["mungekey"], "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30)
    argv = [programs["munged"], "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}"]
    argv += [f"--pid-file={folder / 'munged.pid'}", f"--seed-file={folder / 'munged.seed'}"]
    # --force: munged otherwise refuses a socket folder that is not world-searchable (pytest's tmp is 0700)
    return start_daemon("munged", argv, folder), munge_socket


def _start_slurm_daemons(programs: dict[str, str], folder: Path, node: str, munge_socket: Path) -> list[Daemon]:
    conf = folder / "slurm.conf"
    conf.write_text(_slurm_conf(folder, node, munge_socket))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    slurmctld = start_daemon("slurmctld", [programs["slurmctld"], "-D", "-i", "-f", str(conf)], folder, env)
    slurmd = start_daemon("slurmd", [programs["slurmd"], "-D", "-N", node, "-f", str(conf)], folder, env)
    return [slurmctld, slurmd]


def _node_idle(cluster: SlurmCluster) -> bool:
    return cluster.node_state().split()[1:2] == ["idle"]


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A single-node Slurm, node idle: run srun, sinfo and scontrol with ``env()``."""
    if os.geteuid() != 0:
        pytest.skip("a private Slurm needs root (slurmd launches job steps as their user)")
    programs = find_programs(SLURM_PROGRAMS, "slurm-wlm munge")
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    cluster = SlurmCluster(node=short_hostname(), conf=folder / "slurm.conf", folder=folder, daemons=[])
    try:
        munged, munge_socket = _start_munged(programs, folder)
        cluster.daemons.append(munged)
        why_not = wait_for_daemons(munge_socket.exists, cluster.daemons)
        if why_not is None:
            cluster.daemons += _start_slurm_daemons(programs, folder, cluster.node, munge_socket)
            why_not = wait_for_daemons(lambda: _node_idle(cluster), cluster.daemons)
        if why_not:
            pytest.skip(f"Slurm did not come up: {why_not}")
        yield cluster
        cluster.cancel_jobs()
    finally:
        stop_all(cluster.daemons)
