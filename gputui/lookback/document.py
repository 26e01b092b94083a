"""A report as a list of blocks, written out as Markdown or as one self-contained HTML page.

Building the content once and rendering it twice keeps report.md and report.html
saying the same thing.  Every string in a block is plain text, shown as it is (it may
hold a hostname, a preset name or a finding's text from a recording): the renderers
escape it through gputui.escape.  Markup is structure, not syntax: a block's text is a
string or a tuple of strings, :class:`Code` and :class:`Bold` parts.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.escape import for_html, for_markdown, markdown_block, markdown_code_span


@dataclass(frozen=True)
class Code:
    """Text shown as code (a command, a finding's kind)."""

    text: str


@dataclass(frozen=True)
class Bold:
    text: str


Line = str | tuple[str | Code | Bold, ...]  # plain text, or plain text with code and bold parts


@dataclass
class Heading:
    level: int
    text: Line


@dataclass
class Paragraph:
    text: Line


@dataclass
class ReportNote:
    """Something the reader must see first (a cut recording): a quote block."""

    text: Line


@dataclass
class Bullets:
    items: Sequence[Line]


@dataclass
class Table:
    header: Sequence[Line]
    rows: Sequence[Sequence[Line]]


@dataclass
class Image:
    file: str  # a file name in the report's directory
    alt: str


Block = Heading | Paragraph | ReportNote | Bullets | Table | Image


def with_code(text: str) -> Line:
    """Plain text whose `backticked` parts (a command in a finding's advice) become
    :class:`Code`: shown as code in both renderings, not as literal backticks.  An
    unpaired backtick stays as it is."""
    pieces = text.split("`")
    if len(pieces) < 3:
        return text
    if len(pieces) % 2 == 0:  # an odd number of backticks: the last has no partner
        pieces[-2:] = [pieces[-2] + "`" + pieces[-1]]
    parts: list[str | Code | Bold] = []
    for i, piece in enumerate(pieces):
        if i % 2 and piece.strip():
            parts.append(Code(piece))
        elif i % 2:
            parts.append(f"`{piece}`")  # an empty span is no code
        elif piece:
            parts.append(piece)
    return tuple(parts)


def _parts(line: Line) -> tuple[str | Code | Bold, ...]:
    return (line,) if isinstance(line, str) else line


def _md_inline(line: Line) -> str:
    out = []
    for part in _parts(line):
        if isinstance(part, Code):
            out.append(markdown_code_span(part.text))
        elif isinstance(part, Bold):
            out.append(f"**{for_markdown(part.text)}**")
        else:
            out.append(for_markdown(part))
    return "".join(out)


def _md_block(line: Line) -> str:
    return markdown_block(_md_inline(line))


def _md_cell(line: Line) -> str:
    # "|" ends a table cell wherever it stands, in a code span too: escape it there
    return _md_inline(line).replace("|", "\\|")


def markdown_table(header: Sequence[Line], rows: Sequence[Sequence[Line]]) -> str:
    """A table of plain text cells (or lines with code and bold parts), escaped."""
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + _md_inline(block.text))
        elif isinstance(block, Paragraph):
            out.append(_md_block(block.text))
        elif isinstance(block, ReportNote):
            out.append("> " + _md_block(block.text))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_block(item)}" for item in block.items))
        elif isinstance(block, Table):
            out.append(markdown_table(block.header, block.rows))
        elif isinstance(block, Image):
            out.append(f"![{for_markdown(block.alt)}]({block.file})")
    return "\n\n".join(out) + "\n"


def _inline(line: Line) -> str:
    out = []
    for part in _parts(line):
        if isinstance(part, Code):
            out.append(f"<code>{for_html(part.text)}</code>")
        elif isinstance(part, Bold):
            out.append(f"<strong>{for_html(part.text)}</strong>")
        else:
            out.append(for_html(part))
    return "".join(out)


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
        elif isinstance(block, ReportNote):
            body.append(f"<blockquote>{_inline(block.text)}</blockquote>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            data = base64.b64encode((image_dir / block.file).read_bytes()).decode("ascii")
            body.append(f'<p><img alt="{for_html(block.alt)}" src="data:image/png;base64,{data}"></p>')
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{for_html(title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
