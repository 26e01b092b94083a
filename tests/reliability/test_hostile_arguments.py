"""Issue 26, classes 2 and 5: odd arguments, environment variables and preset values are
one line and exit 2 before anything runs, never a traceback, and a value that may be a
secret never appears in the line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.process import gputui_env, run_gputui

RECORD = ["--headless", "--no-history", "--record", "run.jsonl", "--force", "--duration", "1"]


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()  # argparse's refusals too: no usage block
    assert len(lines) == 1 and lines[0].startswith(("gputui: error: ", "gputui: error: argument")) and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("address", "expected"),
    [("²", "expected [HOST:]PORT"), ("a..b:9400", "'a..b' is not a host name"), ("h" * 300 + ":9400", "253 characters at most")],
)
def test_a_listen_address_it_cannot_use_is_one_line(tmp_path, address, expected):
    assert expected in one_line_error(run_gputui([*RECORD, "--serve-metrics", address], tmp_path))


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "lots"])
def test_a_history_size_that_is_not_a_finite_positive_number_is_one_line(tmp_path, value):
    env = {**gputui_env(tmp_path), "GPUTUI_HISTORY_MAX_MB": value}
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "--headless", "--record", "run.jsonl", "--duration", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "GPUTUI_HISTORY_MAX_MB: expected a finite size in MB greater than 0" in one_line_error(done)


def test_an_empty_preset_name_is_refused_not_read_as_no_preset(tmp_path):
    assert "--preset: expected a preset's name, got an empty one" in one_line_error(run_gputui([*RECORD, "--preset", ""], tmp_path))
    (tmp_path / "p.toml").write_text('[presets.""]\ncommand = ["true"]\n')
    assert "expected a preset name that is not empty" in one_line_error(run_gputui(["presets", "validate", "p.toml"], tmp_path))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('command = ["echo", "a\\u0000b"]', "command: expected arguments without NUL characters"),
        ('command = ["true"]\nenv = { "A=B" = "x" }', "variable names without '=' or NUL characters"),
        ('command = ["true"]\nenv = { A = "x\\u0000y" }', "env.A: a value without NUL characters"),
    ],
)
def test_what_no_process_can_be_given_is_refused_when_the_preset_is_read(tmp_path, table, expected):
    (tmp_path / "p.toml").write_text(f"[presets.bad]\n{table}\n")
    assert expected in one_line_error(run_gputui(["--presets", "p.toml", *RECORD, "--preset", "bad"], tmp_path))


def test_an_env_value_of_the_wrong_type_is_named_but_never_shown(tmp_path):
    (tmp_path / "p.toml").write_text('[presets.bad]\ncommand = ["true"]\nenv = { WANDB_API_KEY = 1234567890123 }\n')
    line = one_line_error(run_gputui(["presets", "validate", "p.toml"], tmp_path))
    assert "env.WANDB_API_KEY" in line and "1234567890123" not in line


def test_a_command_that_cannot_start_is_its_outcome_without_a_traceback(tmp_path):
    garbage = tmp_path / "not-a-program"  # executable, but no format the kernel can run: exec fails
    garbage.write_bytes(b"\x00\x01\x02 nothing the kernel can run\n")
    garbage.chmod(0o755)
    done = run_gputui(["--headless", "--no-history", "--record", "run.jsonl", "--", str(garbage)], tmp_path)
    assert done.returncode != 0 and "cannot start" in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["python", "train.py"], "'python' is not a gputui command (presets, check, report"),
        (["--preset", ""], "argument --preset: expected a preset's name, got an empty one"),
        (["--interval", "fast"], "argument --interval: invalid float value: 'fast'"),
    ],
)
def test_an_argument_argparse_refuses_is_one_line(tmp_path, args, expected):
    line = one_line_error(run_gputui(args, tmp_path))
    assert expected in line
    if args[0] == "python":  # the likeliest slip: the user's own command without the "--" before it
        assert line.endswith("put it after --: gputui -- python ...")


def test_a_subcommands_refusal_is_one_line_too(tmp_path):
    done = run_gputui(["report"], tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == ["gputui report: error: the following arguments are required: FILE"]
