"""Secrets at rest, as a user meets them: a real ``gputui`` run with tokens on its command
line and in its output leaves none of them in any file it writes (the ``--record`` file,
the run history, the live runs folder) nor in what ``runs``, ``report`` and the progress
line show, while the child still gets the real values; the folders are 0700 and the
files 0600, and a looser folder or file left by an older gputui is tightened when a run
starts.  docs/reliability.md ("Secrets at rest") names these tests."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gputui.record.recording import read_recording
from gputui.record.redact import REDACTED
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.live import stop_leftovers, wait_live, wait_readings
from tests.support.other_user import other_user  # noqa: F401  (the fixture)
from tests.support.process import REPO, run_gputui

pytestmark = pytest.mark.usefixtures("no_leftovers")

# One of each form a secret takes on a command line; the values are made up.
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
OPTION_TOKEN = "opt-tok-5f2e9a71c"  # after --token
PASSWORD = "hunter2-Sup3r-s3cret"  # in --password=
URL_PASSWORD = "urlPa55w0rdQ"  # https://user:PASSWORD@host
# ... and in the child's output
GITHUB = "ghp_" + "Z" * 6 + "y1x2w3v4u5t6s7r8q9p0o1n2m3l4"
OPENAI = "sk-proj-" + "Qw3rTy" * 6
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
PRINTED_KEY = "pr1nted-ap1-key-77"  # api_key=...
BEARER = "b3arer.t0ken-xyz"
ALL = [HF, OPTION_TOKEN, PASSWORD, URL_PASSWORD, GITHUB, OPENAI, AWS, PRINTED_KEY, BEARER]

# The child: says what it was given (to a file of the test's, outside gputui's folders),
# then prints secrets as a careless training script would.
CHILD = f"""\
import json, os, sys
open(sys.argv[1], "w").write(json.dumps({{"argv": sys.argv[2:], "hf": os.environ.get("HF_TOKEN")}}))
print("logged in with {GITHUB}", flush=True)
print("config: api_key={PRINTED_KEY} lr=0.1 batch_size=32", flush=True)
print("openai {OPENAI} aws {AWS}", flush=True)
print("Authorization: Bearer {BEARER}", flush=True)
print("step 1 | 160.0 samples/s", flush=True)
"""


def secret_command(tmp_path: Path) -> tuple[list[str], Path]:
    """``env HF_TOKEN=... python child.py SAW --token X --password=X URL --lr 0.1``: the
    command, and the file where the child says what it got."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    saw = tmp_path / "child-saw.json"
    argv = ["env", f"HF_TOKEN={HF}", sys.executable, str(child), str(saw)]
    argv += ["--token", OPTION_TOKEN, f"--password={PASSWORD}", f"https://me:{URL_PASSWORD}@example.com/data", "--lr", "0.1"]
    return argv, saw


def files_under(*roots: Path) -> list[Path]:
    return sorted(path for root in roots for path in ([root] if root.is_file() else root.rglob("*")) if path.is_file())


def assert_no_secret(where: str, text: str) -> None:
    found = [secret for secret in ALL if secret in text]
    assert not found, f"{where} holds {found}"


def assert_private(state: Path) -> None:
    """gputui's state folder and each folder in it 0700, each file 0600."""
    top = state / "gputui"
    for path in [top, *top.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


def test_no_secret_of_the_command_or_its_output_is_kept_or_shown(tmp_path):
    state = tmp_path / "state"
    out = tmp_path / "r.jsonl"
    argv, saw = secret_command(tmp_path)
    result = run_gputui(["--headless", "--record", str(out), "--interval", "0.1", "--", *argv], tmp_path)
    assert result.returncode == 0, result.stderr

    # The child got the real values.
    given = json.loads(saw.read_text())
    assert given["hf"] == HF and given["argv"][:3] == ["--token", OPTION_TOKEN, f"--password={PASSWORD}"]

    kept = files_under(state)
    assert any(path.suffix == ".jsonl" for path in kept), kept  # the history copy was written
    for path in [out, *kept]:
        assert_no_secret(str(path), path.name + "\n" + path.read_text(encoding="utf-8", errors="replace"))

    header = read_recording(out).header
    assert header.command is not None and header.command[:2] == ["env", f"HF_TOKEN={REDACTED}"]
    assert header.command[5:9] == ["--token", REDACTED, f"--password={REDACTED}", f"https://me:{REDACTED}@example.com/data"]
    assert header.command[9:] == ["--lr", "0.1"]  # ordinary arguments as they were
    outputs = [event.payload.text for event in read_recording(out).events_of("output")]  # type: ignore[union-attr]
    assert f"config: api_key={REDACTED} lr=0.1 batch_size=32" in outputs
    assert "step 1 | 160.0 samples/s" in outputs

    running = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if line.startswith("gputui: running")]
    assert running and all(REDACTED in line for line in running)
    for line in running:
        assert_no_secret("the progress line", line)

    listed = run_gputui(["runs"], tmp_path)
    listed_json = run_gputui(["runs", "--json"], tmp_path)
    report = run_gputui(["report", str(out)], tmp_path)
    for face, shown in (("runs", listed), ("runs --json", listed_json), ("report", report)):
        assert shown.returncode == 0, shown.stderr
        assert_no_secret(face, shown.stdout + shown.stderr)
    assert REDACTED in report.stdout

    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert_private(state)


def test_a_detached_run_keeps_no_secret_in_its_live_entry_while_it_runs(tmp_path):
    state = tmp_path / "state"
    argv, _ = secret_command(tmp_path)
    loop = tmp_path / "child.py"
    loop.write_text(CHILD + "import time\nwhile True:\n    time.sleep(0.2)\n    print('step 2 | 160.0 samples/s', flush=True)\n")
    started = run_gputui(["--detach", "--interval", "0.1", "--", *argv], tmp_path)
    assert started.returncode == 0, started.stderr
    try:
        live = wait_live(state)
        assert live.kept_path is not None
        wait_readings(live.kept_path, 1)
        assert_no_secret("gputui --detach", started.stdout + started.stderr)
        for path in files_under(state):  # the live entry and the history copy, while the run goes
            assert_no_secret(str(path), path.name + "\n" + path.read_text(encoding="utf-8", errors="replace"))
        listed = run_gputui(["runs"], tmp_path)
        assert listed.returncode == 0 and live.name in listed.stdout, listed.stderr
        assert_no_secret("runs", listed.stdout + listed.stderr)
        assert_private(state)
    finally:
        stop_leftovers(state)


def test_loose_folders_and_files_of_an_older_gputui_are_tightened_when_a_run_starts(tmp_path):
    state = tmp_path / "state"
    runs, live = state / "gputui" / "runs", state / "gputui" / "live"
    for folder in (runs, live):
        folder.mkdir(parents=True)
    old_run = runs / "20250101-000000-old.jsonl"
    old_run.write_text("{}\n")
    leftover = live / "20250101-000000-old.jsonl"
    leftover.write_text("")
    for path, mode in ((state / "gputui", 0o755), (runs, 0o755), (live, 0o775), (old_run, 0o644), (leftover, 0o664)):
        path.chmod(mode)
    result = run_gputui(["--headless", "--record", str(tmp_path / "r.jsonl"), "--", sys.executable, "-c", "print('hi')"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert_private(state)
    assert old_run.read_text() == "{}\n"  # tightened, not touched


def test_new_folders_are_private_from_the_first_run(tmp_path):
    state = tmp_path / "state"
    assert not state.exists()
    result = run_gputui(["--headless", "--record", str(tmp_path / "r.jsonl"), "--", sys.executable, "-c", "print('hi')"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o700  # made by gputui: private too (the XDG rule)
    assert_private(state)


# --- Another user of the machine ------------------------------------------------------


def test_another_user_can_read_nothing_of_the_history(tmp_path, other_user):  # noqa: F811
    """On a box whose homes others may walk into (0755), a second local user, made for
    the test, cannot list the history nor read a run, though it can read a 0644 file
    beside them: so the refusal is the modes' doing, not the path's."""
    box = Path(tempfile.mkdtemp(prefix="gputui-secrets-box-"))
    try:
        home = box / "owner"
        state = home / ".local" / "state"
        state.mkdir(parents=True)
        for folder in (box, home, home / ".local", state):
            folder.chmod(0o755)
        control = state / "readable-by-all.txt"
        control.write_text("anyone\n")
        control.chmod(0o644)
        env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(home / ".config"), "PYTHONPATH": str(REPO)}
        argv, _ = secret_command(tmp_path)
        done = subprocess.run(
            [sys.executable, "-m", "gputui", "--headless", "--record", str(tmp_path / "r.jsonl"), "--", *argv],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        runs = state / "gputui" / "runs"
        kept = files_under(runs)
        assert kept
        assert other_user.run(["cat", str(control)]).stdout == "anyone\n"  # the other user reaches this far
        for attempt in (["ls", str(state / "gputui")], ["ls", str(runs)], *(["cat", str(path)] for path in kept)):
            refused = other_user.run(attempt)
            assert refused.returncode != 0 and "Permission denied" in refused.stderr, (attempt, refused)
    finally:
        shutil.rmtree(box, ignore_errors=True)


def test_a_secret_in_the_runs_last_words_stays_out_of_its_outcome(tmp_path):
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--headless", "--record", str(out), "--", sys.executable, "-c", f"raise SystemExit('bad token {GITHUB}')"], tmp_path)
    assert result.returncode == 1, result.stderr
    assert GITHUB in result.stdout  # the user's own terminal gets the output as it was
    outcome = read_recording(out).summary.outcome
    assert outcome.message == f"exited with code 1: bad token {REDACTED}"
    assert_no_secret("the gputui lines", result.stderr)
    for path in [out, *files_under(tmp_path / "state")]:
        assert_no_secret(str(path), path.read_text(encoding="utf-8", errors="replace"))


def test_the_dashboards_preset_panel_shows_a_commands_secrets_redacted(tmp_path):
    """A preset of ``presets.toml`` whose command carries tokens: the dashboard's preset
    panel shows the command as the run's recording keeps it, never the tokens."""
    from gputui.presets.preset import load_file
    from gputui.tui.widgets.presets import describe_preset

    argv, _ = secret_command(tmp_path)
    presets_file = tmp_path / "presets.toml"
    presets_file.write_text(f"[presets.train]\ncommand = {json.dumps(argv)}\n")
    preset = load_file(presets_file)["train"]
    shown = describe_preset(preset, [], compact=False).plain
    assert_no_secret("the preset panel", shown)
    assert f"HF_TOKEN={REDACTED}" in shown and f"--token '{REDACTED}'" in shown and "--lr 0.1" in shown  # the command itself still read
