"""Another user's process on the GPU names itself: its program and script, as NVML and
/proc give them, reach ``gputui check``'s faces (the progress line, ``--markdown``, the
JSON) as text, never as a terminal's escape sequence or live Markdown and HTML.  The
process comes through the fake NVML and the real attribution (GpuTelemetry,
ProcessAttributor, short_command: tests/support/outside_text.py), into the check's load
watcher, and out of each face.  tests/reliability/test_outside_strings.py feeds any
strings through these faces and the others."""

from __future__ import annotations

import json
import re

from markdown_it import MarkdownIt

from gputui.check import verdict_text as render
from gputui.check.micro_stage import grade_micro
from gputui.check.under_load import LoadWatcher, load_results
from gputui.model import Sample
from gputui.record.schema import CheckSummary
from tests.support.check_gpus import h100, micro
from tests.support.outside_text import Stranger, shared_gpu
from tests.support.records import make_header

# A program named to retitle the terminal, inject HTML and Markdown (no "/": it is a basename).
PROGRAM = "\x1b]0;PWNED\x07<script>alert(1)<\\script>**b**"
SCRIPT = "[x](javascript:alert(1))`code`.py"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but "\n"
LIVE_TOKENS = {"html_block", "html_inline", "link_open", "image", "em_open", "strong_open", "code_inline"}
MARKDOWN = MarkdownIt("commonmark").enable(["table"])


def hostile_sample() -> Sample:
    """One sample through the fake NVML: our run's process and theirs, 20 GiB."""
    _infos, samples = shared_gpu("NVIDIA H200", Stranger(PROGRAM, (PROGRAM, SCRIPT), "mallory"))
    return samples[0]


def check_results():
    watcher = LoadWatcher()
    watcher.begin()
    watcher.on_sample(hostile_sample())
    gpu = h100()
    results = load_results(watcher, [gpu])
    results += grade_micro([micro("matmul_bf16", 500.0, gpu=0)], [gpu], co_runners=watcher.co_runners_text)  # a slow matmul names them too
    return results


def test_the_co_tenant_is_seen_and_named():
    co_runners = next(r for r in check_results() if r.id == "gpu0.co_runners")
    assert co_runners.status == "warn" and PROGRAM in (co_runners.detail or "")


def test_the_progress_lines_show_the_name_escaped():
    lines = [line for result in check_results() for line in render.progress_lines(result)]
    text = "\n".join(lines)
    assert not RAW_CONTROL.search(text)
    assert "\\x1b]0;PWNED\\x07" in text


def test_the_markdown_shows_the_name_as_text_nothing_live():
    results = check_results()
    document = render.markdown(results, make_header({"host": {"hostname": "box", "os": "Linux"}, "gpus": [{"index": 0, "name": "NVIDIA H100"}]}))
    assert not RAW_CONTROL.search(document)
    tokens = [t for block in MARKDOWN.parse(document) for t in [block, *(block.children or [])]]
    live = [t.type for t in tokens if t.type in LIVE_TOKENS]
    assert live == ["strong_open"], f"live markup from a process name: {live}"  # gputui's own: the verdict in bold
    assert "<script" not in document and "**b**" not in document
    assert "| WARN | gpu0 | Other processes under load | 1 processes |" in document  # the table itself stands


def test_the_markdown_shows_a_hostile_host_and_gpu_name_as_text():
    header = make_header(
        {"host": {"hostname": "<img src=x onerror=alert(1)>", "os": "Linux", "cpu_model": "**cpu**"}, "gpus": [{"index": 0, "name": "[g](javascript:y)"}]}
    )
    document = render.markdown([], header)
    assert "<img" not in document and "**cpu**" not in document and "[g](javascript:y)" not in document


def test_the_json_holds_the_name_as_data():
    results = check_results()
    text = render.to_json(results, make_header({}), CheckSummary(verdict="warn"))
    assert not RAW_CONTROL.search(text)  # JSON escapes ESC as \u001b
    checks = json.loads(text)["checks"]
    assert any(PROGRAM in (c.get("detail") or "") for c in checks)  # the data itself kept as it was
