"""Trust in what gputui writes and prints (issue 15, points 2, 3, 6 and 7): secrets stay
out of recordings, user text cannot drive the terminal, signals give their own exit
codes, and a recording that cannot be trusted is one line and exit 2."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui import fmt
from gputui.diagnosis.__main__ import main as diagnose
from gputui.errors import UserError
from gputui.record.recording import read_recording
from gputui.record.redact import REDACTED, looks_secret, redact_env
from tests.support.live import wait_live
from tests.support.lookback import TRACES
from tests.support.process import gputui_env, run_gputui, start_gputui, try_read, wait_for

ESC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title: must never reach it raw


def toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string, escapes included


# --- 2. Secrets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["WANDB_API_KEY", "HF_TOKEN", "aws_secret_access_key", "DB_Password", "MYSQL_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "BASIC_AUTH", "SSH_PRIVATE"]
)
def test_names_that_look_secret(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "NCCL_DEBUG", "PATH"])
def test_names_that_do_not(name):
    assert not looks_secret(name)


def test_redact_env_keeps_names_and_lists_what_it_hid():
    shown, hidden = redact_env({"HF_TOKEN": "hf_abc", "OMP_NUM_THREADS": "4", "api_key": "k"})
    assert shown == {"HF_TOKEN": REDACTED, "OMP_NUM_THREADS": "4", "api_key": REDACTED}
    assert hidden == ["HF_TOKEN", "api_key"]


SECRET = "s3cr3t-value-42"
ENV_SCRIPT = "import os, sys; open(sys.argv[1], 'w').write(os.environ['WANDB_API_KEY'] + ' ' + os.environ['OMP_NUM_THREADS'])"


def secret_presets(tmp_path: Path) -> Path:
    seen = tmp_path / "child-saw.txt"
    path = tmp_path / "secret.toml"
    path.write_text(
        "[presets.secret]\n"
        f'command = [{toml_str(sys.executable)}, "-c", {toml_str(ENV_SCRIPT)}, {toml_str(str(seen))}]\n'
        f'env = {{ WANDB_API_KEY = "{SECRET}", db_password = "{SECRET}", OMP_NUM_THREADS = "3" }}\n'
    )
    return path


def test_secret_env_values_stay_out_of_the_recording_but_reach_the_child(tmp_path):
    out = tmp_path / "r.jsonl"
    presets = secret_presets(tmp_path)
    result = run_gputui(["--presets", str(presets), "--preset", "secret", "--record", str(out), "--interval", "0.1"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "child-saw.txt").read_text() == f"{SECRET} 3"  # the child got the real values
    assert SECRET not in out.read_text()
    assert SECRET not in result.stderr
    header = read_recording(out).header
    expected = {"WANDB_API_KEY": REDACTED, "db_password": REDACTED, "OMP_NUM_THREADS": "3"}
    assert header.env == expected
    assert header.preset is not None and header.preset.extra["env"] == expected
    assert header.env_redacted == ["WANDB_API_KEY", "db_password"]
    kept = list((tmp_path / "state").rglob("*.jsonl"))  # the run history's copy too
    assert kept and all(SECRET not in path.read_text() for path in kept)


def test_presets_show_redacts_secret_values(tmp_path):
    presets = secret_presets(tmp_path)
    result = run_gputui(["--presets", str(presets), "presets", "show", "secret"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout
    shown = json.loads(result.stdout)
    assert shown["env"] == {"WANDB_API_KEY": REDACTED, "db_password": REDACTED, "OMP_NUM_THREADS": "3"}
    assert shown["env_redacted"] == ["WANDB_API_KEY", "db_password"]


# --- 3. Terminal injection -------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, shown",
    [
        (ESC_TITLE, "\\x1b]0;pwned\\x07"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("line\nnext\ttab\r", "line\\nnext\\ttab\\r"),
        ("c1 \x9b31m del \x7f", "c1 \\x9b31m del \\x7f"),
        ("bidi \u202eevil\u2069", "bidi \\u202eevil\\u2069"),
        ("42 °C ✓ H200 日本語 é", "42 °C ✓ H200 日本語 é"),  # ordinary text is left alone
    ],
)
def test_printable_escapes_control_characters_only(raw, shown):
    assert fmt.printable(raw) == shown


def test_presets_list_shows_escapes_in_names_and_descriptions(tmp_path):
    presets = tmp_path / "evil.toml"
    presets.write_text(f'[presets.{toml_str("evil" + ESC_TITLE)}]\nframework = "smoke"\ndescription = {toml_str("clears the screen " + chr(27) + "[2J")}\n')
    result = run_gputui(["--presets", str(presets), "presets", "list"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "evil\\x1b]0;pwned\\x07" in result.stdout
    assert "clears the screen \\x1b[2J" in result.stdout


def test_an_unknown_preset_name_is_escaped_in_the_error(tmp_path):
    result = run_gputui(["--record", str(tmp_path / "r.jsonl"), "--preset", "x" + ESC_TITLE], tmp_path)
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "x\\x1b]0;pwned\\x07" in result.stderr


def test_the_headless_progress_lines_escape_argv_and_the_runs_last_words(tmp_path):
    script = f"import sys; sys.stderr.write({ESC_TITLE!r} + 'boom\\n'); sys.exit(3)"
    presets = tmp_path / "evil.toml"
    presets.write_text(f'[presets.evil]\ncommand = [{toml_str(sys.executable)}, "-c", {toml_str(script)}, {toml_str(ESC_TITLE)}]\n')
    result = run_gputui(["--presets", str(presets), "--preset", "evil", "--record", str(tmp_path / "r.jsonl")], tmp_path)
    assert result.returncode == 1, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "gputui: running " in result.stderr and "\\x1b]0;pwned\\x07" in result.stderr


# --- 6. Exit codes ---------------------------------------------------------------------

SLEEPER = '[presets.sleeper]\ncommand = ["sleep", "60"]\n'
SIGNAL_CODES = [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]


# A hangup stops no run (tests/live/test_detached_runs.py: it goes on); the others stop it.
@pytest.mark.parametrize("sig, code", [(sig, code) for sig, code in SIGNAL_CODES if sig != signal.SIGHUP], ids=lambda v: getattr(v, "name", str(v)))
def test_the_headless_recorder_exits_128_plus_the_signal(tmp_path, sig, code):
    (tmp_path / "sleeper.toml").write_text(SLEEPER)
    out = tmp_path / "r.jsonl"
    proc = start_gputui(["--presets", "sleeper.toml", "--preset", "sleeper", "--record", str(out), "--no-history"], tmp_path)
    try:
        wait_for(lambda: (rec := try_read(out)) is not None and rec.events_of("started"), timeout=60)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
    finally:
        proc.kill()
        proc.communicate()
    rec = read_recording(out)
    assert rec.summary.outcome.kind == "stopped"  # finished, with its summary


def _read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    seen = b""

    def more() -> bool:
        nonlocal seen
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                return False
        return needle in seen

    wait_for(more, timeout=timeout, interval=0)
    return seen


@pytest.mark.parametrize("sig, code", SIGNAL_CODES, ids=lambda v: getattr(v, "name", str(v)))
def test_the_dashboard_exits_128_plus_the_signal_and_its_run_goes_on(tmp_path, sig, code):
    (tmp_path / "sleeper.toml").write_text(SLEEPER)
    master, slave = pty.openpty()
    env = {**gputui_env(tmp_path), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "--presets", "sleeper.toml", "--preset", "sleeper", "--no-history"],
        cwd=tmp_path,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        _read_until(master, b"sleeper")  # the dashboard is up, running the preset
        live = wait_live(tmp_path / "state")
        proc.send_signal(sig)
        # Keep reading so the app is never blocked on a full terminal while it leaves.
        wait_for(lambda: (select.select([master], [], [], 0.2)[0] and _drain(master)) or proc.poll() is not None, timeout=60)
        assert proc.wait(timeout=5) == code
        assert live.alive()  # the signal was the dashboard's: the run is a process of its own
        assert run_gputui(["stop", live.name], tmp_path).returncode == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def _drain(fd: int) -> bool:
    try:
        os.read(fd, 65536)
    except OSError:
        pass
    return False


# --- 7. Recordings that lie ----------------------------------------------------------------

HEADER = {
    "type": "header",
    "schema": 1,
    "interval": 1.0,
    "gpus": [{"index": 0, "name": "H200", "memory_total": 150}],
    "host": {"hostname": "h", "os": "linux", "cpu_logical": 8},
    "preset": {"name": "p"},
    "diagnosis": {},
}
SAMPLE = {
    "type": "sample",
    "t": 1.0,
    "gpus": [{"index": 0, "util_gpu": 50.0, "memory_used": 10, "memory_total": 150}],
    "host": {"cpu_percent": 20.0, "processes": [{"pid": 5, "cpu_percent": 100.0}]},
}
EVENT = {"type": "event", "t": 1.0, "event": "throughput", "samples_per_sec": 100.0, "source": "gputui"}
SUMMARY = {"type": "summary", "duration_s": 2.0}


def write_lines(path: Path, *records) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def assert_refused(path: Path, capsys, *words: str) -> str:
    """read_recording raises UserError, and the diagnosis CLI says one line and exits 2."""
    with pytest.raises(UserError) as caught:
        read_recording(path)
    assert diagnose([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no "no findings"
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gputui: error: {path}"), captured.err
    for word in words:
        assert word in lines[0], lines[0]
    return str(caught.value)


def test_a_well_formed_recording_still_reads(tmp_path, capsys):
    path = write_lines(tmp_path / "ok.jsonl", HEADER, SAMPLE, EVENT, SUMMARY)
    assert diagnose([str(path)]) == 0
    assert "no findings" in capsys.readouterr().out


@pytest.mark.parametrize(
    "records, where",
    [
        ([{**HEADER, "gpus": "H200"}, SAMPLE], ":1: header.gpus"),
        ([{**HEADER, "gpus": [{"index": "0", "name": "H200"}]}, SAMPLE], ":1: header.gpus[0].index"),
        ([{**HEADER, "host": "h"}, SAMPLE], ":1: header.host"),
        ([{**HEADER, "preset": ["p"]}, SAMPLE], ":1: header.preset"),
        ([{**HEADER, "diagnosis": {"thermal_warn_c": "hot"}}, SAMPLE], ":1: header.diagnosis.thermal_warn_c"),
        ([HEADER, {**SAMPLE, "t": "soon"}], ":2: sample.t"),
        ([HEADER, {**SAMPLE, "gpus": [1]}], ":2: sample.gpus[0]"),
        ([HEADER, {**SAMPLE, "gpus": [{"index": 0, "temp_c": "hot"}]}], ":2: sample.gpus[0].temp_c"),
        ([HEADER, {**SAMPLE, "host": {"processes": [{"pid": None}]}}], ":2: sample.host.processes[0].pid"),
        ([HEADER, SAMPLE, {**EVENT, "t": None}], ":3: event.t"),
        ([HEADER, SAMPLE, {**EVENT, "event": 7}], ":3: event"),
        ([HEADER, SAMPLE, {**EVENT, "samples_per_sec": "fast"}], ":3: event.samples_per_sec"),
        ([HEADER, SAMPLE, {"type": "event", "t": 1, "event": "outcome", "kind": ["oom"]}], ":3: event.kind"),
        ([HEADER, SAMPLE, {"type": 3}], ":3: type"),
    ],
)
def test_fields_of_the_wrong_type_are_one_line_naming_the_field(tmp_path, capsys, records, where):
    path = write_lines(tmp_path / "bad.jsonl", *records)
    assert_refused(path, capsys, where, "expected")


def test_deeply_nested_json_is_one_line(tmp_path, capsys):
    deep = '{"type": "sample", "t": 1, "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path = write_lines(tmp_path / "deep.jsonl", HEADER, deep)
    assert_refused(path, capsys, ":2:", "nested")


def test_a_huge_file_with_no_newline_is_not_called_empty(tmp_path, capsys):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.truncate(100 * 1024 * 1024)  # 100 MB of NUL bytes, not one newline
    message = assert_refused(path, capsys, "no complete line")
    assert "empty" not in message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(tmp_path, capsys, constant):
    line = json.dumps(SAMPLE).replace('"util_gpu": 50.0', f'"util_gpu": {constant}')
    path = write_lines(tmp_path / "nan.jsonl", HEADER, line)
    assert_refused(path, capsys, ":2:", constant)


@pytest.mark.parametrize("schema", [99, 0, "1", 1.5])
def test_a_schema_this_gputui_cannot_read_is_refused(tmp_path, capsys, schema):
    path = write_lines(tmp_path / "schema.jsonl", {**HEADER, "schema": schema}, SAMPLE, EVENT, SUMMARY)
    assert_refused(path, capsys, ":1:")


# Any one value of a real recording replaced by a JSON value of another shape: reading
# and diagnosing it either works or is a UserError, never a traceback.
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=2),
    st.just([{}]),
    st.just({"index": 0}),
)


def _paths(value, prefix=()):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield prefix + (key,)
            yield from _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:3]):
            yield prefix + (i,)
            yield from _paths(inner, prefix + (i,))


REAL = [json.loads(line) for line in (TRACES / "input_bound_1worker.jsonl").read_text().splitlines()[:40]]
REAL_PATHS = [(i, p) for i, record in enumerate(REAL) for p in _paths(record) if p != ("type",)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(REAL_PATHS), value=JSON_VALUES)
def test_a_recording_with_any_value_changed_reads_or_is_refused_in_one_line(tmp_path, capsys, where, value):
    from gputui.diagnosis.engine import replay_recording

    records = json.loads(json.dumps(REAL))
    index, path = where
    target = records[index]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    file = write_lines(tmp_path / "fuzz.jsonl", *records)
    try:
        replay_recording(read_recording(file))
    except UserError:
        pass


def test_a_recording_without_samples_does_not_claim_a_clean_bill(tmp_path, capsys):
    path = write_lines(tmp_path / "header-only.jsonl", HEADER)
    assert diagnose([str(path)]) == 0
    captured = capsys.readouterr()
    assert "no samples to diagnose" in captured.out
    assert "no summary" in captured.err  # and that the file ends early


def test_the_dashboard_shows_a_presets_control_characters_escaped():
    from gputui.presets.preset import Preset
    from gputui.tui.widgets.presets import describe_preset

    preset = Preset(name="evil\x1b]0;owned\x07", source=Path("presets.toml"), description="desc\x1b[2J", command=("echo", "\x1b[31mred"))
    text = describe_preset(preset, [], compact=False).plain
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b]0;owned\\x07" in text and "desc\\x1b[2J" in text and "\\x1b[31mred" in text
