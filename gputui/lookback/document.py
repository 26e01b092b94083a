"""A report as a list of blocks, written out as Markdown or as one self-contained HTML page.

Building the content once and rendering it twice keeps report.md and report.html
saying the same thing.  Inline markup is limited to ``code`` and **bold**.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class Note:
    """Something the reader must see first (a cut recording): a quote block."""

    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    file: str  # a file name in the report's directory
    alt: str


Block = Heading | Paragraph | Note | Bullets | Table | Image


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + block.text)
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Note):
            out.append("> " + block.text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table):
            out.append(markdown_table(block.header, block.rows))
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.file})")
    return "\n\n".join(out) + "\n"


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    escaped = html.escape(text, quote=False)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return _BOLD.sub(r"<strong>\1</strong>", escaped)


_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}blockquote{border-left:4px solid #c60;margin:1em 0;padding:.5em 1em;background:#fff4e8}
img{max-width:100%}code{background:#f3f3f3;padding:0 .2em}"""


def to_html(blocks: list[Block], title: str, image_dir: Path) -> str:
    """One page, images inlined as base64 so the file can be mailed or attached alone."""
    body = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Note):
            body.append(f"<blockquote>{_inline(block.text)}</blockquote>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            data = base64.b64encode((image_dir / block.file).read_bytes()).decode("ascii")
            body.append(f'<p><img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}"></p>')
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
