"""One escaping layer per output kind, for text that came from outside gputui.

A preset's name, description or argv, a GPU name or hostname in a recording, a
finding's text, a file or directory name: any of them may hold an escape sequence
(``ESC ] 0 ; title BEL`` retitles a terminal), Markdown or HTML (``<script>``), a
spreadsheet formula (``=cmd|...``) or Rich markup (``[link=...]``).  Every face
that shows such text passes it through the function for what it writes:

- a terminal (print, a CLI table): :func:`for_terminal`, control characters shown
  escaped (``\\x1b``);
- Markdown: :func:`for_markdown` (text) and :func:`markdown_code_span` (a code
  span): also the markup escaped and raw HTML made inert, so text reads as text;
- HTML: :func:`for_html`;
- CSV: :func:`for_csv_cell`, a cell a spreadsheet would run as a formula made text;
- a plot (matplotlib's titles, labels, ticks, legends): :func:`for_plot`, ``$`` escaped
  so no name is parsed as math text;
- the dashboard: :func:`for_widget` (where Textual or Rich would read a string as
  markup: a title, an option, a table cell) and :func:`widget_text` (a Rich Text a
  panel built from parts); the app's notifications go through the same.

Each of them first applies :func:`for_terminal`: every face's output may end up on a
terminal (``gputui report`` prints Markdown, ``compare --csv`` prints CSV).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

from gputui.fmt import UNSAFE, printable

if TYPE_CHECKING:  # Rich and Textual load for the dashboard only (the CLIs stay light)
    from rich.text import Text

for_terminal = printable

# Markdown: backslash-escape what starts inline markup (emphasis, code, links,
# images, strikethrough, headings), and write <, > and & as entities so no raw HTML,
# autolink or entity survives.  "_" inside a word (USD_PER_HOUR) starts nothing and
# stays; a table cell's "|" is the table's to escape; block markers that count only
# at the start of a block (a list's "-", "+" or "1.") are markdown_block's.
_MARKDOWN_INLINE = str.maketrans({**{char: "\\" + char for char in "\\`*[]~#"}, "<": "&lt;", ">": "&gt;", "&": "&amp;"})
_UNDERSCORE_AT_WORD_EDGE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_BLOCK_MARKER = re.compile(r" {0,3}(?:[-+]|\d{1,9}[.)])")


def for_markdown(text: object) -> str:
    """Text for a Markdown document: it reads as the text it is, markup and all."""
    return _UNDERSCORE_AT_WORD_EDGE.sub(r"\\_", for_terminal(text).translate(_MARKDOWN_INLINE))


def markdown_block(inline: str) -> str:
    """Markdown inline text (already escaped) made safe to start a block with:
    a leading "- ", "+ " or "1. " would otherwise open a list."""
    marker = _BLOCK_MARKER.match(inline)
    if marker is None:
        return inline
    last = marker.end() - 1  # the "-", "+" or the "." of "1."
    return inline[:last] + "\\" + inline[last:]


def markdown_code_span(text: object) -> str:
    """Text as a Markdown code span, shown verbatim: fenced by more backticks than it
    holds in a row, padded with a space where it starts or ends with one."""
    content = for_terminal(text)
    if not content:
        return ""
    fence = "`" * (max((len(run) for run in re.findall("`+", content)), default=0) + 1)
    pad = " " if content[0] in "` " or content[-1] in "` " else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def for_html(text: object) -> str:
    """Text for an HTML page: the markup and control characters escaped."""
    return html.escape(for_terminal(text), quote=True)


# CSV: a cell starting with one of these is run as a formula by spreadsheets
# (OWASP "CSV injection"); a quote in front makes it text.  A plain number ("-3.5",
# "-1,234") is no formula and stays a number.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def for_csv_cell(value: Any) -> Any:
    """A CSV cell: text with control characters escaped and formulas made inert;
    numbers and empty cells as they are."""
    if not isinstance(value, str):
        return value
    text = for_terminal(value)
    if text.startswith(_FORMULA_START) and text not in ("-", "+") and not _is_number(text):
        return "'" + text
    return text


def for_plot(text: object) -> str:
    """Text for a matplotlib title, label, tick or legend entry: control characters
    escaped (matplotlib's missing-glyph warnings would print them raw) and every ``$``
    escaped, so the text is never parsed as math (an unknown command between two ``$``
    raises inside matplotlib, and any other math changes what is shown)."""
    return for_terminal(text).replace("$", r"\$")


def _is_number(text: str) -> bool:
    return any(char.isdigit() for char in text) and _NUMBER.fullmatch(text) is not None


def for_widget(text: object) -> Text:
    """Text for a Textual title, option, table cell or Static: a Rich Text, so never
    read as markup (``[link=...]`` shows as typed), its control characters escaped."""
    from rich.text import Text

    return Text(for_terminal(text))


_UNSAFE_IN_A_LINE = re.compile(f"(?!\n){UNSAFE.pattern}")


def widget_text(text: Text) -> Text:
    """A panel's Rich Text with the control characters of its parts shown escaped,
    its styles kept; line breaks (the panel's lines) stay."""
    from rich.text import Span, Text

    cuts = sorted({i for m in _UNSAFE_IN_A_LINE.finditer(text.plain) for i in (m.start(), m.end())})
    if not cuts:  # the usual case: the text as it is
        return text
    safe = Text(style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end)
    for piece in text.divide(cuts):
        if _UNSAFE_IN_A_LINE.fullmatch(piece.plain):
            shown = for_terminal(piece.plain)
            piece = Text(shown, style=piece.style, spans=[Span(0, len(shown), span.style) for span in piece.spans])
        safe.append_text(piece)
    return safe
