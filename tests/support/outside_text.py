"""Text from outside gputui as the escaping tests feed it (a test helper, no tests): the
strings a stranger controls (Hypothesis strategies of them), the checks that a face
shows them as text (no raw control character, no live Markdown or HTML, nothing a
UTF-8 terminal or file cannot take), and a GPU shared with another user's process as
gputui reads it, its names the test's to choose.

The shared GPU comes through the fake NVML (tests/support/fake_nvml.py) and gputui's
own attribution (GpuTelemetry, ProcessAttributor, short_command): NVML lists our run's
process and theirs; what psutil would say of theirs (its name, its command line, its
user) is the test's.  psutil decodes a command line that is not UTF-8 with
``surrogateescape`` (psutil._common.decode), so a process can name itself with lone
surrogates (``exec -a $'\\xff' ...`` gives ``'\\udcff'``).  The fake NVML hands a GPU's
name over as given, surrogates too: pynvml decodes NVML's own strictly, but a recording's
names come through JSON, which keeps them.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gputui.model import GpuInfo, Sample
from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.gpu_processes import ProcessAttributor, ProcessFacts, short_command
from tests.support.fake_nvml import FakeGpu, FakeNvml

GIB = 1024**3

# --- what a face may not show raw ---------------------------------------------------------

# C0 and C1 controls (all but "\n"), DEL, line separators, bidi overrides and isolates,
# and lone surrogates (no UTF-8 terminal or file takes them; written with
# surrogateescape, "\udc9b" is the C1 byte 0x9b itself).
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
LIVE_TOKENS = {"html_block", "html_inline", "link_open", "image", "em_open", "strong_open", "s_open", "heading_open", "bullet_list_open", "ordered_list_open"}
# Headings and bullets count as live only where gputui did not make them: a Paragraph
# is checked on its own (test_escaping.test_markdown_shows_any_text_as_itself_and_nothing_live).


def assert_no_raw_control(text: str) -> None:
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} in {text[max(0, found.start() - 40) : found.end() + 40]!r}"


def is_gputuis_own(token) -> bool:
    """The report's headings and bullets, and its plots: a PNG it wrote beside it."""
    own_plot = token.type == "image" and re.fullmatch(r"[a-z_]+\.png", str(token.attrs.get("src")))
    return token.type in ("heading_open", "bullet_list_open") or bool(own_plot)


def assert_inert_markdown(text: str, own: frozenset[str] = frozenset()) -> list:
    """No raw control character; parsed, nothing but gputui's own structure (and the
    token kinds in ``own`` that the caller knows are gputui's).  The parsed blocks are
    returned: parsing a long hostile text is most of these tests' time, so it is parsed
    once (MarkdownIt.render is its renderer over this same parse)."""
    assert_no_raw_control(text)
    blocks = MARKDOWN.parse(text)
    tokens = [t for block in blocks for t in [block, *(block.children or [])]]
    live = [t.type for t in tokens if t.type in LIVE_TOKENS - own and not is_gputuis_own(t)]
    assert not live, live
    rendered = MARKDOWN.renderer.render(blocks, MARKDOWN.options, {})
    assert "<script" not in rendered and 'href="javascript' not in rendered
    return blocks


def raw_screen(app) -> str:
    """What the terminal would be sent for a Textual app's whole screen (colours off),
    less the cursor moves Rich itself writes."""
    from rich.console import Console

    console = Console(width=app.size[0], height=app.size[1], file=io.StringIO(), force_terminal=True, color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", console.file.getvalue())


# --- strings a stranger controls ----------------------------------------------------------

CONTROLS = [
    "\x1b]0;PWNED\x07",  # OSC: the terminal's title
    "\x1b]8;;http://e\x1b\\",  # OSC 8: a hyperlink, ended by ST
    "\x1b[2J",  # CSI: clear the screen
    "\x1b[31m",
    "\x1bP+q\x1b\\",  # DCS
    "\x9b2J",  # the 8-bit CSI
    "\x9d0;t\x9c",  # the 8-bit OSC and ST
    "\x85",
    "\x07",
    "\x00",
    "\x08",
    "\x7f",
    "\r",
    "\n",
    "\t",
    "\u2028",
    "\u202e",  # right-to-left override
    "\u2066",
]
MARKUP = [
    "$",
    "$\\x$",  # math text to matplotlib: an unknown command raises
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&amp;",
    "`",
    "``",
    "**b**",
    "_e_",
    "[x](javascript:y)",
    "![i](x)",
    "[link=http://e]y[/link]",  # Rich markup
    "[b]",
    "|",
    "\\",
    "=cmd|' /C calc'!A0",
    "# ",
    "- ",
    "1. ",
    "> ",
    "~~",
]
# What psutil makes of bytes that are not UTF-8 (surrogateescape: 0x80-0xff as U+DC80-U+DCFF)
surrogates = st.one_of(st.integers(0xDC80, 0xDCFF).map(chr), st.just("\ud800"))
pieces = st.one_of(st.text(max_size=10), st.sampled_from(CONTROLS), st.sampled_from(MARKUP), surrogates)
short_outside = st.lists(pieces, min_size=1, max_size=8).map("".join)
# ... and as long as a command line may be (a few thousand characters)
outside = st.one_of(short_outside, short_outside.map(lambda s: ((s or "\x1b") * (4_000 // max(1, len(s)) + 1))[:4_000]))


# --- a GPU shared with another user's process ---------------------------------------------

RUN_PID, THEIR_PID = 1000, 2000


@dataclass(frozen=True)
class Stranger:
    """Another user's process on the GPU, as psutil would read it."""

    name: str  # psutil's Process.name()
    argv: tuple[str, ...]  # its command line
    user: str | None

    def facts(self) -> ProcessFacts:
        return ProcessFacts(2.0, self.name, self.user, short_command(self.name, list(self.argv)), (1,))


def shared_gpu(gpu_name: str, stranger: Stranger, seconds: int = 1) -> tuple[list[GpuInfo], list[Sample]]:
    """The GPU's info and a sample a second for ``seconds`` seconds: our run's process
    (10 GiB) and the stranger's (20 GiB) on one GPU named ``gpu_name``."""
    table = {RUN_PID: ProcessFacts(1.0, "python", "me", "python train.py", (1,)), THEIR_PID: stranger.facts()}
    now = [0.0]
    nvml = FakeNvml([FakeGpu(name=gpu_name, processes=[(RUN_PID, 10 * GIB), (THEIR_PID, 20 * GIB)])])
    telemetry = GpuTelemetry(nvml, clock=lambda: now[0], use_gpm=False)  # the processes are read once a second
    telemetry.open()
    telemetry._attributor = ProcessAttributor(own_pid_namespace=False, lookup=table.get, start_time=lambda pid: table[pid].create_time)
    telemetry.follow_run(lambda: frozenset({RUN_PID}))
    samples = []
    for second in range(1, seconds + 1):
        now[0] = float(second)
        samples.append(Sample(t=float(second), gpus=telemetry.sample()))
    return list(telemetry.infos), samples
