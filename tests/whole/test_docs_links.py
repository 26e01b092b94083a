"""Every relative link in README.md and docs/**/*.md resolves to a file or folder in the
checkout (issue 45: results move, are compressed or archived, and a page must not point
at what went).  Web links (http, https, mailto) and links to an anchor of the same page
are not checked; a link's own anchor (``page.md#section``) is dropped before the check.
Links inside fenced code blocks and inline code are not links."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.support.process import REPO

CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
# [text](target) and ![alt](target), the text holding at most one level of brackets;
# the target bare or in <>, with an optional "title"
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, …


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def without_fences(text: str) -> str:
    """The text less its fenced code blocks (``` or ~~~, closed by the same fence)."""
    kept, fence = [], None
    for line in text.splitlines():
        opening = line.lstrip()[:3]
        if fence is None and opening in ("```", "~~~"):
            fence = opening
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


def links(text: str) -> list[str]:
    """The link targets of a Markdown text, outside code."""
    text = CODE_SPAN.sub("", without_fences(text))
    found = [m.group(1) for m in INLINE.finditer(text)] + [m.group(1) for m in REFERENCE.finditer(text)]
    return [target.strip("<>") for target in found]


def broken(page: Path) -> list[str]:
    missing = []
    for target in links(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target) or target.startswith("#"):
            continue
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        resolved = (REPO / path.lstrip("/")) if path.startswith("/") else (page.parent / path)
        if not resolved.exists():
            missing.append(target)
    return missing


def test_the_link_reader_finds_links_and_skips_code_and_the_web():
    text = (
        'See [a](a.md), ![shot](img/s.svg "title"), [b](<b c.md#x>) and [c [d]](e/).\n'
        "`[not](code.md)` and [web](https://example.com), [here](#top).\n"
        "```sh\n[no](fenced.md)\n```\n"
        "[ref]: ref.md\n"
    )
    assert links(text) == ["a.md", "img/s.svg", "b c.md#x", "e/", "https://example.com", "#top", "ref.md"]


def test_a_missing_target_is_reported(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md#part) [gone](gone.json) [web](http://x) [anchor](#y)\n")
    assert broken(page) == ["gone.json"]


def test_there_are_pages_to_check():
    assert len(pages()) > 10


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_of_a_page_resolves(page):
    missing = broken(page)
    assert not missing, f"{page.relative_to(REPO)} links to files that are not there: {missing}"
