"""Redaction of command lines and output lines (gputui.record.redact): generated secrets
never survive it, in any of the forms a command line or a log line carries them, and
ordinary arguments and log lines pass unchanged."""

from __future__ import annotations

import shlex
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.record.redact import REDACTED, redact_argv, redact_text, secret_name

PROPERTY = settings(max_examples=100, deadline=None)

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


def body(alphabet: str, size: int, extra: int = 20) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size + extra)


# Each well-known token shape, with a body of its real length or longer.
token_shapes = st.one_of(
    body(ALNUM, 34).map(lambda b: "hf_" + b),
    st.tuples(st.sampled_from("pousr"), body(ALNUM, 36)).map(lambda t: f"gh{t[0]}_{t[1]}"),
    body(ALNUM + "_", 82).map(lambda b: "github_pat_" + b),
    body(ALNUM + "_-", 20).map(lambda b: "glpat-" + b),
    st.tuples(st.sampled_from(["", "proj-", "ant-api03-", "svcacct-"]), body(ALNUM + "_-", 40)).map(lambda t: f"sk-{t[0]}{t[1]}"),
    st.tuples(st.sampled_from(["AKIA", "ASIA"]), body(UPPER_DIGITS, 16, 0)).map("".join),
    st.tuples(st.sampled_from("bpars"), body(ALNUM + "-", 24)).map(lambda t: f"xox{t[0]}-{t[1]}"),
    body(ALNUM + "_-", 50).map(lambda b: "pypi-" + b),
    body(ALNUM + "_-", 35, 0).map(lambda b: "AIza" + b),
    st.tuples(body(ALNUM, 12), body(ALNUM, 20), body(ALNUM + "_-", 20)).map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"),
)
# What may stand on either side of a token in an argument or a line: text, then a mark
# that is not part of a word (a token glued to a word is that word's, not a token).
SEPARATORS = " \t=:'\"/,;()[]{}<>@|"
around = st.tuples(st.text(max_size=30), st.sampled_from(SEPARATORS)).map("".join)
after = st.tuples(st.sampled_from(SEPARATORS), st.text(max_size=30)).map("".join)
# A secret's value as a user types it: anything but a NUL, at least 6 characters (the
# checks below look for it in what is shown), not an option of its own.
secret_values = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=6, max_size=40).filter(
    lambda v: not v.startswith("-") and not v.isspace()
)
# Names that say "secret": the common variables, and generated ones around a secret word.
SECRET_ENV_NAMES = [
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "DB_PASSWORD",
    "PGPASSWORD",
]
name_part = st.text(string.ascii_uppercase, min_size=1, max_size=6)
secret_env_names = st.one_of(
    st.sampled_from(SECRET_ENV_NAMES),
    st.tuples(st.lists(name_part, max_size=2), st.sampled_from(["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "AUTH_TOKEN"])).map(
        lambda t: "_".join([*t[0], t[1]])
    ),
)
SECRET_OPTIONS = [
    "--token",
    "--password",
    "--api-key",
    "--api_key",
    "--secret",
    "--access-key",
    "--auth",
    "--auth-token",
    "--hf-token",
    "--hub_token",
    "--apiKey",
    "--passwd",
    "-password",
    "--secret-key",
    "--credentials",
]

# Ordinary arguments of a training command: nothing here is a secret's.
segments = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=12)
paths = st.tuples(
    st.sampled_from(["", "/", "./", "~/"]), st.lists(segments, min_size=1, max_size=4), st.sampled_from(["", ".py", ".yaml", ".json", ".pt", ".csv"])
).map(lambda t: t[0] + "/".join(t[1]) + t[2])
numbers = st.one_of(st.integers(-(10**9), 10**9).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr))
option_with_number = st.tuples(
    st.sampled_from(
        ["--lr", "--batch-size", "--epochs", "--max-tokens", "--max_new_tokens", "--seed", "--num-workers", "--warmup-steps", "--tokens-per-batch", "-n"]
    ),
    numbers,
).map(list)
option_with_word = st.tuples(
    st.sampled_from(["--tokenizer", "--tokenizer_name", "--model", "--output-dir", "--config", "--key-file", "--token-file", "--auth-type", "--dataset"]),
    st.one_of(paths, st.sampled_from(["gpt2", "bert-base-uncased", "meta-llama/Llama-3-8B", "resnet50", "bf16", "basic"])),
).map(list)
settings_args = st.tuples(
    st.sampled_from(["optimizer.lr", "trainer.max_epochs", "model.tokenizer", "data.max_tokens", "+experiment", "pad_token_id", "KEYBOARD"]), numbers
).map(lambda t: [f"{t[0]}={t[1]}"])
switches = st.sampled_from(["--fp16", "--no-auth", "--compile", "-v", "--push-to-hub", "--"]).map(lambda s: [s])
ordinary_args = st.lists(
    st.one_of(paths.map(lambda p: [p]), numbers.map(lambda n: [n]), option_with_number, option_with_word, settings_args, switches), max_size=8
).map(lambda groups: [arg for group in groups for arg in group])
programs = st.sampled_from(
    [
        ["python", "train.py"],
        ["torchrun", "--nproc-per-node=8", "train.py"],
        ["python", "-m", "nanogpt.train"],
        ["./run.sh"],
        ["accelerate", "launch", "fit.py"],
    ]
)


def leaks(secret: str, shown: str, *context: str) -> bool:
    """Whether ``shown`` still holds ``secret``, or a long enough piece of either end of
    it that is not also in the ``context`` the secret was put in."""
    piece = max(6, len(secret) // 2)
    return any(part in shown and not any(part in text for text in context) for part in (secret, secret[:piece], secret[-piece:]))


# --- Token shapes, anywhere -----------------------------------------------------------


@PROPERTY
@given(around, token_shapes, after)
@example("export HF_TOKEN=", "hf_" + "a" * 34, "\n")
def test_a_token_shape_never_survives_in_a_line(before, token, rest):
    assert not leaks(token, redact_text(before + token + rest), before, rest)


@PROPERTY
@given(ordinary_args, around, token_shapes, after, ordinary_args)
def test_a_token_shape_never_survives_in_an_argument(head, before, token, rest, tail):
    shown = redact_argv(["python", "train.py", *head, before + token + rest, *tail])
    context = [*head, before, rest, *tail]
    assert not any(leaks(token, arg, *context) for arg in shown)
    assert not leaks(token, shlex.join(shown), *context)


@PROPERTY
@given(around, token_shapes, after)
def test_a_token_across_the_cut_goes_whole(before, token, rest):
    line = before + token + rest
    for limit in range(len(before), len(before) + len(token) + 1, 7):
        shown = redact_text(line, limit=limit)
        assert len(shown) <= limit and not leaks(token, shown, before, rest)


# --- Command lines ------------------------------------------------------------------------


@PROPERTY
@given(secret_env_names, secret_values, programs, ordinary_args, st.booleans())
@example("HF_TOKEN", "hunter2!", ["python", "train.py"], ["--lr", "0.1"], True)
def test_an_env_assignment_before_the_program_loses_its_value(name, value, program, args, with_env):
    before = ["/usr/bin/env"] if with_env else []  # env's form, or the shell's
    assert redact_argv([*before, f"{name}={value}", *program, *args]) == [*before, f"{name}={REDACTED}", *program, *args]


@PROPERTY
@given(secret_env_names, secret_values, programs, ordinary_args)
def test_env_with_its_own_options_first(name, value, program, args):
    argv = ["env", "-i", "-u", "DISPLAY", "OMP_NUM_THREADS=4", f"{name}={value}", *program, *args]
    assert redact_argv(argv) == ["env", "-i", "-u", "DISPLAY", "OMP_NUM_THREADS=4", f"{name}={REDACTED}", *program, *args]


@PROPERTY
@given(programs, ordinary_args, st.sampled_from(SECRET_OPTIONS), secret_values, ordinary_args)
def test_a_secret_option_loses_its_next_argument(program, head, option, value, tail):
    argv = [*program, *head, option, value, *tail]
    shown = redact_argv(argv)
    at = len(program) + len(head)
    assert shown == [*program, *head, option, REDACTED, *tail]
    assert argv[at + 1] == value  # the child's argv is not touched


@PROPERTY
@given(programs, ordinary_args, st.sampled_from(SECRET_OPTIONS), secret_values, ordinary_args)
def test_a_secret_option_loses_its_value_after_the_equals_sign(program, head, option, value, tail):
    shown = redact_argv([*program, *head, f"{option}={value}", *tail])
    assert shown == [*program, *head, f"{option}={REDACTED}", *tail]


@PROPERTY
@given(
    st.sampled_from(["https", "http", "git+https", "redis", "postgresql", "s3"]),
    st.text(ALNUM + "._-", min_size=1, max_size=12),
    st.text(ALNUM + "!$%*+-._~", min_size=6, max_size=30),
    st.text(string.ascii_lowercase + ".", min_size=1, max_size=20),
    ordinary_args,
)
def test_a_url_keeps_its_user_and_loses_its_password(scheme, user, password, host, args):
    url = f"{scheme}://{user}:{password}@{host}/repo.git"
    shown = redact_argv(["git", "clone", url, *args])
    assert shown == ["git", "clone", f"{scheme}://{user}:{REDACTED}@{host}/repo.git", *args]
    assert redact_text(f"fetching {url} ...") == f"fetching {scheme}://{user}:{REDACTED}@{host}/repo.git ..."


@PROPERTY
@given(programs, ordinary_args)
@example(["python", "train.py"], ["--lr", "0.1", "--batch-size", "32", "--max-tokens", "4096", "--tokenizer", "gpt2", "--no-auth", "x.py"])
def test_ordinary_arguments_pass_unchanged(program, args):
    argv = [*program, *args]
    assert redact_argv(argv) == argv
    assert redact_text(shlex.join(argv)) == shlex.join(argv)


# --- Output lines ---------------------------------------------------------------------


@PROPERTY
@given(
    st.sampled_from(["api_key", "HF_TOKEN", "password", "wandb.apiKey", "client_secret", "auth_token", "AWS_SECRET_ACCESS_KEY", "db-passwd"]),
    st.sampled_from(["{}={}", "{}: {}", "'{}': '{}'", '"{}": "{}"', "--{} {}", "{} = {}"]),
    st.text(ALNUM + "!#$%+./^_~-", min_size=6, max_size=40).filter(lambda v: not v.startswith("-")),
    st.text(max_size=30),
)
def test_a_named_secret_in_a_line_loses_its_value(name, form, value, before):
    line = before + " " + form.format(name, value) + " done"
    assert not leaks(value, redact_text(line), before, name)


@PROPERTY
@given(
    st.integers(0, 10**6),
    st.floats(0, 100, allow_nan=False),
    st.floats(0, 1e6, allow_nan=False),
    st.sampled_from(
        [
            "epoch {0} step {0} loss={1:.4f} lr={1:.2e} tokens/s={2:.0f}",
            "Epoch {0}: 100%|##########| {0}/{0} [00:12<00:00, {2:.1f}it/s, loss={1:.3f}]",
            "[rank0]: train_loss={1} grad_norm={1} throughput={2} samples/s max_tokens={0}",
            "pad_token_id: {0}, eos_token: </s>, bos_token_id={0}, vocab_size={0}",
            "Forward pass: {1:.1f} ms, backward pass: {1:.1f} ms, key frames {0}",
            "saved checkpoint to /data/keys/ckpt-{0}.pt ({2:.0f} bytes)",
            "Using tokenizer: gpt2 (tokens: {0})",
        ]
    ),
)
def test_ordinary_log_lines_pass_unchanged(n, x, rate, template):
    line = template.format(n, x, rate)
    assert redact_text(line) == line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Authorization: Bearer abc.def-123", "Authorization: <redacted>"),
        ("curl -H 'Authorization: Bearer abc.def-123' https://x", "curl -H 'Authorization: <redacted>' https://x"),
        ("GET https://h/x?token=abc123&page=2", "GET https://h/x?token=<redacted>&page=2"),
        ("{'api_key': 'abc', 'lr': 0.1}", "{'api_key': '<redacted>', 'lr': 0.1}"),
        ('{"password":"p w d","user":"me"}', '{"password":"<redacted>","user":"me"}'),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01", "HF_TOKEN=<redacted>"),
        ("nothing to see", "nothing to see"),
    ],
)
def test_lines(line, expected):
    assert redact_text(line) == expected


def test_a_shell_string_is_redacted_inside():
    shown = redact_argv(["sh", "-c", "HF_TOKEN=abc123 python train.py --token xyz789 --lr 0.1"])
    assert shown == ["sh", "-c", f"HF_TOKEN={REDACTED} python train.py --token {REDACTED} --lr 0.1"]


def test_settings_given_as_arguments():
    shown = redact_argv(["python", "train.py", "wandb.api_key=abc123", "+hub.token=xyz", "optimizer.lr=0.1"])
    assert shown == ["python", "train.py", f"wandb.api_key={REDACTED}", f"+hub.token={REDACTED}", "optimizer.lr=0.1"]


def test_a_secret_option_at_the_end_or_before_an_option_hides_nothing_else():
    assert redact_argv(["train.py", "--token"]) == ["train.py", "--token"]
    assert redact_argv(["train.py", "--token", "--lr", "0.1"]) == ["train.py", "--token", "--lr", "0.1"]


@pytest.mark.parametrize("name", ["--hf-token", "api_key", "wandb.apiKey", "HF_TOKEN", "--hftoken", "client_secret", "Authorization", "DB_PASSWORD"])
def test_secret_names(name):
    assert secret_name(name)


@pytest.mark.parametrize("name", ["--max-tokens", "--tokenizer", "pad_token_id", "pad_token", "--token-file", "--auth-type", "KEYBOARD", "--monkey", "lr"])
def test_names_that_are_not_secrets(name):
    assert not secret_name(name)
