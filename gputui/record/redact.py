"""Secret values kept out of what gputui writes and prints: recordings, the run history,
``report``, ``presets show``, the progress line and the dashboard.

A variable whose name looks secret keeps its name (so a reader sees it was set) and
loses its value.  The child still gets the real value: only what gputui shows is redacted.

A command line (:func:`redact_argv`) loses the values of ``K=V`` assignments before the
program (``env HF_TOKEN=... python train.py``, or the shell's form without ``env``) whose
name looks secret, of secret-named options (``--token X``, ``--password=X``,
``--api-key X``, ``wandb.api_key=X``), the password of a URL
(``https://user:<redacted>@host``) and anything shaped like a well-known token
(:data:`TOKEN_SHAPES`), wherever it stands.  The child's output lines
(:func:`redact_text`) lose token shapes, URL passwords, what follows ``Bearer`` and the
values of ``name=value``, ``name: value`` and ``--name value`` where the name is a
secret's (:func:`secret_name`).  docs/reliability.md lists it all.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping, Sequence

REDACTED = "<redacted>"
# Parts of names that mark a secret, matched anywhere in the name, in any case.  Broad
# on purpose (KEYBOARD_LAYOUT is hidden too): hiding a harmless value costs little.
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE")

# Whole words of an option's or a setting's name (split at "-", "_", "." and camelCase)
# that make it a secret's.  Words, not parts: a training command is full of
# ``--max-tokens`` and ``--tokenizer``, whose values are no secret and worth keeping.
_SECRET_NAME_WORDS = frozenset(
    ("token", "password", "passwd", "pwd", "passphrase", "secret", "secrets", "key", "auth", "authorization", "credential", "credentials", "cookie", "bearer")
)
# Words run together (``--hftoken``, ``apikey``): the end says it.
_SECRET_NAME_ENDS = ("token", "password", "passwd", "secret", "apikey", "accesskey", "secretkey", "privatekey", "authkey", "sessionkey")
# A last word that makes the value something about a secret, not the secret: an id, a
# kind, a file's path (``pad_token_id``, ``--auth-type``, ``--token-file``).
_ABOUT_A_SECRET = frozenset(("id", "ids", "type", "types", "file", "path", "dir", "len", "length", "size", "count", "env", "var"))
# A tokenizer's special tokens, printed by many training runs: names of words, not keys.
_SPECIAL_TOKENS = frozenset(("pad", "eos", "bos", "unk", "sep", "cls", "mask"))
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Well-known token shapes: each is a secret wherever it stands, whatever names it.
TOKEN_SHAPES = (
    r"hf_[A-Za-z0-9]{16,}",  # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub: personal, OAuth, user-to-server, server, refresh
    r"github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained personal token
    r"glpat-[A-Za-z0-9_-]{16,}",  # GitLab
    r"sk-[A-Za-z0-9_-]{16,}",  # OpenAI, Anthropic (sk-ant-...), and others of that form
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",  # AWS access key ids: long-lived and temporary
    r"xox[abeoprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"pypi-[A-Za-z0-9_-]{16,}",  # PyPI upload tokens
    r"AIza[A-Za-z0-9_-]{30,}",  # Google API keys
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # a JWT: header.payload.signature
)
_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(TOKEN_SHAPES) + r")")
# scheme://user:password@ : the user stays, the password goes
_URL_PASSWORD = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s@]*@")
_BEARER = re.compile(r"(?i)(\bbearer\s+)(?!" + re.escape(REDACTED) + r")[A-Za-z0-9._~+/=-]+")
# name=value, name: value, "name": "value", --name value, matched where a name starts
# (the name is judged in code).
# The dashed form alone may have a space for its separator: "Forward pass 3" is prose.
_NAMED_VALUE = re.compile(
    r"""(?P<dash>-{1,2})?(?P<quote>["']?)(?P<name>[A-Za-z_][\w.-]*)(?P=quote)"""
    r"""(?:\s*[=:]\s*|(?(dash)\s+|(?!)))"""
    r"""(?P<value>"[^"]*"|'[^']*'|(?:(?i:bearer|basic|token|digest)\s+)?[^\s"',;&)}\]]+)"""
)
# Bits of text (lower-cased) that each kind of secret holds: a line with none of them
# is passed on after a few substring tests, no regex run over it (output lines come by
# the thousand a second).
_NAME_HINTS = ("token", "key", "pass", "pwd", "secret", "auth", "cred", "cookie", "bearer")
_SHAPE_HINTS = ("hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "akia", "asia", "xox", "pypi-", "aiza", "eyj")
# lower-cases ASCII alone, so that a position in the result is the same in the text
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_NOT_NAME = re.compile(r"[^\w.-]")
_NAME_START = re.compile(r"[A-Za-z_]")
_ENV_NAME_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# a setting given as an argument: wandb.api_key=X, and Hydra's +name=X, ++name=X, ~name=X
_SETTING = re.compile(r"([+~]{0,2}[A-Za-z_][\w.-]*)=(.*)", re.DOTALL)
_OPTION = re.compile(r"(-{1,2})([A-Za-z][\w.-]*)(?:=(.*))?", re.DOTALL)
# env's own options that take the next argument as their value
_ENV_OPTIONS_WITH_VALUE = frozenset(("-u", "--unset", "-C", "--chdir", "-S", "--split-string"))
# A text is cut at redact_text's ``limit`` only after redaction; this much past it is
# read too, so that a secret across the cut is seen whole and goes whole.
_CUT_SLACK = 512


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def secret_name(name: str) -> bool:
    """Whether an option's or a setting's name (``--hf-token``, ``api_key``,
    ``wandb.apiKey``) is a secret's, by its whole words: ``--max-tokens``,
    ``pad_token_id`` and ``--token-file`` are not."""
    words = [word.lower() for word in _NAME_WORD.findall(name)]
    if not words or words[-1] in _ABOUT_A_SECRET:
        return False
    for before, word in zip([""] + words, words):
        if (word in _SECRET_NAME_WORDS or word.endswith(_SECRET_NAME_ENDS)) and not (word == "token" and before in _SPECIAL_TOKENS):
            return True
    return False


def redact_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The variables with secret values replaced, and the names replaced (in order)."""
    hidden = [name for name in env if looks_secret(name)]
    return {name: REDACTED if name in hidden else value for name, value in env.items()}, hidden


def _hide_named_values(text: str) -> str:
    """Each secret-named value in ``text`` replaced.  A name that is no secret's is
    passed over to its value only, where the next name is looked for: in
    ``https://host/?token=X`` the value of ``https`` holds the ``token``."""
    kept: list[str] = []
    done = at = 0
    for position in _hint_positions(text.translate(_ASCII_LOWER)):
        if position < at:
            continue  # in a name already looked at: a run of name characters is one name
        after_name = _NOT_NAME.search(text, position)
        at = after_name.start() if after_name is not None else len(text)
        start = position
        while start > done and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
            start -= 1
        if start > done and text[start - 1] in "\"'":
            start -= 1  # the quote of "name": "value"
        match = _NAMED_VALUE.match(text, start)
        if match is None and (letter := _NAME_START.search(text, start, position + 1)) is not None and letter.start() > start:
            match = _NAMED_VALUE.match(text, letter.start())  # past what no name starts with ("9token=")
        if match is None:
            continue
        name, value = match["name"], match["value"]
        if not secret_name(name) or _negated(name) or value.strip("\"'").startswith(REDACTED):
            continue
        quote = value[0] if value[0] in "\"'" else ""
        kept += [text[done : match.start("value")], quote, REDACTED, quote]
        done = at = match.end()
    return "".join(kept) + text[done:] if kept else text


def _hint_positions(low: str) -> list[int]:
    """Where the name hints stand in ``low``, in order: found by plain substring
    searches, far cheaper than a case-blind regular expression over the line."""
    found = []
    for hint in _NAME_HINTS:
        at = low.find(hint)
        while at >= 0:
            found.append(at)
            at = low.find(hint, at + 1)
    return sorted(found)


def _negated(option_name: str) -> bool:
    """``--no-auth``: a switch, whose next argument is not its value."""
    return option_name.lower().startswith(("no-", "no_"))


def redact_text(text: str, limit: int | None = None) -> str:
    """``text`` (an output line, one argument) with its secrets replaced by ``<redacted>``.
    ``limit``: cut to that many characters, after redaction, so that a secret across the
    cut does not leave its first half shown."""
    if limit is not None:
        text = text[: limit + _CUT_SLACK]
    low = text.lower()
    if any(hint in low for hint in _SHAPE_HINTS):
        text = _TOKEN.sub(REDACTED, text)
    if "://" in low:
        text = _URL_PASSWORD.sub(r"\1:" + REDACTED + "@", text)
    if any(hint in low for hint in _NAME_HINTS):
        if "bearer" in low:
            text = _BEARER.sub(r"\1" + REDACTED, text)
        text = _hide_named_values(text)
    return text if limit is None else text[:limit]


def _is_env(word: str) -> bool:
    return os.path.basename(word) == "env"


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line as gputui stores and shows it, its secrets replaced by
    ``<redacted>``; the child is given the real one."""
    shown: list[str] = []
    assigning = True  # before the program: the shell's K=V, or env's
    after_env = False
    hide_next = env_value_next = False
    for arg in argv:
        if hide_next and not arg.startswith("-"):
            hide_next = False
            shown.append(REDACTED)
            continue
        hide_next = False
        if env_value_next:
            env_value_next = False
            shown.append(redact_text(arg))
            continue
        if assigning:
            assignment = _ENV_NAME_ASSIGNMENT.fullmatch(arg)
            if assignment is not None:
                name = assignment[1]
                shown.append(f"{name}={REDACTED}" if looks_secret(name) or secret_name(name) else redact_text(arg))
                continue
            if after_env and arg.startswith("-"):
                env_value_next = arg in _ENV_OPTIONS_WITH_VALUE
                shown.append(redact_text(arg))
                continue
        assigning = after_env = _is_env(arg)
        option = _OPTION.fullmatch(arg)
        if option is not None and secret_name(option[2]) and not _negated(option[2]):
            hide_next = option[3] is None
            shown.append(arg if hide_next else f"{option[1]}{option[2]}={REDACTED}")
            continue
        setting = _SETTING.fullmatch(arg)
        if setting is not None and secret_name(setting[1]) and not any(space in setting[2] for space in " \t\n"):
            shown.append(f"{setting[1]}={REDACTED}")
            continue
        shown.append(redact_text(arg))
    return shown
