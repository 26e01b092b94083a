"""Text from outside gputui (preset names, descriptions and argv; GPU names and
hostnames in recordings; findings; file and directory names) reaches terminals,
documents and the dashboard escaped: no raw control character, no live markup
(gputui.escape, issue 26).

The hostile recording is docs/recordings/torch-resnet50-input-bound.jsonl with
:data:`HOSTILE` written into every text field a face shows; the property tests feed
arbitrary strings through every face's text path.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputui.cli.main import main
from gputui.cli.runs_cli import table as runs_table
from gputui.escape import for_csv_cell, for_markdown, for_terminal, for_widget, markdown_code_span, widget_text
from gputui.fmt import printable
from gputui.lookback.compare import compare_rows, text_table
from gputui.lookback.document import Bullets, Code, Heading, Paragraph, ReportNote, Table, markdown_table, to_html, to_markdown
from gputui.lookback.load import load_recording
from gputui.lookback.report import markdown_report, report_blocks
from gputui.record.history import read_kept_run, runs_dir
from tests.support.lookback import RECORDINGS, write_lines
from tests.support.outside_text import RAW_CONTROL, assert_inert_markdown, assert_no_raw_control, raw_screen

# A title escape (OSC 0 ... BEL), raw HTML, a spreadsheet formula, Markdown emphasis
# and a link, Rich/Textual markup.
HOSTILE = "\x1b]0;PWNED\x07<script>alert(1)</script>=cmd|' /C calc'!A0 **b** [x](javascript:y) [link=http://e]y[/link]"
FORMULA_NAME = '=HYPERLINK("http://e")'
SOURCE = RECORDINGS / "torch-resnet50-input-bound.jsonl"


def hostile_header(header: dict, text: str) -> dict:
    header["host"]["hostname"] = text
    header["gpus"][0]["name"] = text
    header["preset"].update(name=text, description=text)
    header["command"] = [text, "--flag", text]
    return header


def hostile_records(source: Path, text: str) -> list[dict]:
    """``source``'s records with ``text`` in every field a face shows."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    for record in records:
        if record.get("type") == "header":
            hostile_header(record, text)
        findings = [record] if record.get("event") == "finding" else record.get("findings", []) if record.get("type") == "summary" else []
        for finding in findings:
            finding.update(title=text, advice=[text])
        if record.get("type") == "summary" and record.get("outcome"):
            record["outcome"]["message"] = text
    return records


def file_name_of(text: str) -> str:
    return "run-" + text.replace("/", "_") + ".jsonl"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """The input-bound recording, hostile in its fields and its file name."""
    return write_lines(tmp_path / file_name_of(HOSTILE), hostile_records(SOURCE, HOSTILE))


def assert_no_formula(cells: list[str]) -> None:
    for cell in cells:
        assert_no_raw_control(cell)
        if cell.startswith(("=", "+", "-", "@")):
            assert cell in ("-", "+") or re.fullmatch(r"[-+][\d.,eE+-]+", cell), cell


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ---- the faces, each fed the hostile recording, preset file or directory -----------


def test_report_markdown_on_stdout_and_in_the_file_is_inert(hostile, tmp_path, capsys):
    code, out, err = run_cli(["report", str(hostile)], capsys)
    assert code == 0, err
    assert_inert_markdown(out)
    assert "PWNED" in out and "\\x1b" in out  # shown, escaped: not dropped
    code, out, err = run_cli(["report", str(hostile), "--out", str(tmp_path / "out"), "--html"], capsys)
    assert code == 0, err
    assert_inert_markdown((tmp_path / "out" / "report.md").read_text(encoding="utf-8"))
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert_no_raw_control(page)
    assert "<script" not in page and "<strong>b</strong>" not in page


def test_report_keeps_gputuis_own_code_and_bold():
    text = markdown_report(load_recording(SOURCE))
    assert "`input_bound`, open" in text and "| Command | `/opt/torch/.venv/bin/python3 -m gputui.workloads" in text


def test_runs_lists_hostile_kept_runs_escaped(hostile, capsys):
    folder = runs_dir()
    folder.mkdir(parents=True)
    hostile.rename(folder / hostile.name)
    code, out, err = run_cli(["runs"], capsys)
    assert code == 0, err
    assert_no_raw_control(out)
    assert "\\x1b]0;PWNED\\x07" in out


def test_compare_text_markdown_and_csv_are_inert(hostile, tmp_path, capsys):
    other = write_lines(tmp_path / "plain.jsonl", hostile_records(SOURCE, FORMULA_NAME))
    argv = ["compare", str(hostile), str(other)]
    code, text, err = run_cli(argv, capsys)
    assert code == 0, err
    assert_no_raw_control(text)
    code, markdown, err = run_cli([*argv, "--markdown"], capsys)
    assert code == 0, err
    assert_inert_markdown(markdown)
    code, out, err = run_cli([*argv, "--csv"], capsys)
    assert code == 0, err
    assert_no_raw_control(out)
    rows = list(csv.reader(io.StringIO(out)))
    assert_no_formula([cell for row in rows for cell in row])
    assert ["preset", for_terminal(HOSTILE), "'" + FORMULA_NAME] in rows  # the formula made text


def test_export_message_escapes_the_file_names_and_the_csv_its_cells(hostile, tmp_path, capsys):
    records = hostile_records(SOURCE, HOSTILE)
    for record in records:
        if record.get("type") == "sample" and record.get("gpus"):
            record["gpus"][0]["throttle_reasons"] = ["=cmd|' /C calc'!A0", "\x1b]0;X\x07"]
    write_lines(hostile, records)
    out_file = tmp_path / ("out-" + HOSTILE.replace("/", "_") + ".csv")
    code, out, err = run_cli(["export", str(hostile), "--csv", str(out_file)], capsys)
    assert code == 0, err
    assert_no_raw_control(out)
    cells = [cell for row in csv.reader(io.StringIO(out_file.read_text(encoding="utf-8"))) for cell in row]
    assert_no_formula(cells)
    assert "'=cmd|' /C calc'!A0|\\x1b]0;X\\x07" in cells


def test_presets_validate_and_path_escape_file_and_directory_names(tmp_path, monkeypatch, capsys):
    folder = tmp_path / HOSTILE.replace("/", "_")
    folder.mkdir()
    (folder / "presets.toml").write_text('[presets.mine]\ndescription = "mine"\ncommand = ["true"]\n', encoding="utf-8")
    code, out, err = run_cli(["presets", "validate", str(folder / "presets.toml")], capsys)
    assert code == 0, err
    assert_no_raw_control(out + err)
    monkeypatch.chdir(folder)
    code, out, err = run_cli(["presets", "path"], capsys)
    assert code == 0, err
    assert_no_raw_control(out + err)
    assert "\\x1b]0;PWNED\\x07" in out


# ---- the dashboard --------------------------------------------------------------


def test_dashboard_shows_a_hostile_preset_and_kept_run_without_raw_controls(hostile, tmp_path):
    from gputui.presets.preset import Preset
    from gputui.record.history import RunHistory
    from gputui.tui.screens.findings_screen import FindingsScreen
    from tests.support.dashboard import make_dashboard
    from tests.support.tui import run_async, scripted_factory, shown, wait_until

    folder = tmp_path / "runs"
    folder.mkdir()
    hostile.rename(folder / hostile.name)
    preset = Preset(name=HOSTILE, source=Path("hostile.toml"), description=HOSTILE, framework="smoke")
    finding = {"id": "x-1", "kind": "input_bound", "state": "open", "severity": "warning", "title": HOSTILE, "since": 1.0, "advice": [HOSTILE]}

    async def scenario() -> None:
        app = make_dashboard(
            {preset.name: preset},
            session_factory=scripted_factory(findings=[finding]),
            start_preset=preset.name,
            settings_file=tmp_path / "s.toml",
            history=RunHistory(folder),
        )
        async with app.run_test(size=(140, 45)) as pilot:
            await wait_until(pilot, lambda: app.state.run and app.state.open_findings() and app.state.history, what="run, finding, kept run")
            await shown(pilot)
            screen = raw_screen(app)
            assert "PWNED" in screen
            assert_no_raw_control(screen)
            assert "\x1b]" not in app.title + app.sub_title
            app.notify(HOSTILE)
            await pilot.press("f")
            await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), what="findings view")
            await shown(pilot)
            assert_no_raw_control(raw_screen(app))

    run_async(scenario())


# ---- every face's text path, fed arbitrary strings -------------------------------

CONTROLS = ["\x00", "\x07", "\x08", "\x1b", "\x1b]0;t\x07", "\x1b[31m", "\x9b", "\x85", "\r", "\n", "\t", "\u2028", "\u202e", "\x7f"]
MARKUP = [
    "<script>",
    "</p>",
    "&amp;",
    "**",
    "__",
    "_",
    "*",
    "`",
    "``",
    "[x](javascript:y)",
    "![i](x)",
    "# ",
    "- ",
    "1. ",
    "> ",
    "~~",
    "|",
    "\\",
    "[b]",
    "[/]",
    "[link=x]",
    "=",
]
pieces = st.one_of(st.text(max_size=20), st.sampled_from(CONTROLS), st.sampled_from(MARKUP))
short = st.lists(pieces, max_size=12).map("".join)
hostile_text = st.one_of(short, short.map(lambda s: ((s or "\x1b") * (10_000 // max(1, len(s or "x")) + 1))[:10_000]))
PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def inline_text(blocks: list) -> str:
    """The text a Markdown renderer shows for one paragraph, from its parsed blocks."""
    tokens = [c for t in blocks if t.type == "inline" for c in t.children or []]
    return "".join(c.content for c in tokens if c.type in ("text", "code_inline"))


@PROPERTY
@given(hostile_text)
@example("\x1b]0;PWNED\x07<script>alert(1)</script>")
@example("1. x")
@example("a\\")
def test_markdown_shows_any_text_as_itself_and_nothing_live(text):
    document = to_markdown([Paragraph(text)])
    blocks = assert_inert_markdown(document)
    assert {t.type for t in blocks} <= {"paragraph_open", "inline", "paragraph_close"}
    assert inline_text(blocks).strip() == printable(text).strip()
    every_block = [Heading(2, text), ReportNote(text), Bullets([text]), Table([text], [[text, (Code(text),)]]), Paragraph(("x ", Code(text), " y"))]
    assert_inert_markdown(to_markdown(every_block) + "\n" + markdown_code_span(text))


@PROPERTY
@given(hostile_text)
def test_every_other_output_kind_escapes_any_text(text):
    shown = printable(text)
    assert for_terminal(text) == shown and not RAW_CONTROL.search(shown) and "\n" not in shown
    assert not RAW_CONTROL.search(for_markdown(text)) and "<" not in for_markdown(text)
    page = to_html([Paragraph((text, Code(text))), Table([text], [[text]])], text, Path("."))
    assert_no_raw_control(page)
    assert "<script" not in page and page.count("<code>") == 1
    assert not re.search(r"<(?!/?(p|code|table|thead|tbody|tr|th|td|style|title|head|body|html|meta)\b|!DOCTYPE)", page)
    cell = for_csv_cell(text)
    assert_no_formula([cell])
    written = io.StringIO()
    csv.writer(written).writerow([cell])
    assert next(csv.reader(io.StringIO(written.getvalue()))) == [cell]
    assert for_widget(text).plain == shown and not for_widget(text).spans


@PROPERTY
@given(hostile_text)
def test_widget_text_escapes_the_parts_and_keeps_the_styles(text):
    from rich.text import Text

    panel = Text("GPU0 ", "bold")
    panel.append(text, "red")
    panel.append("\nnext line", "dim")
    safe = widget_text(panel)
    assert_no_raw_control(safe.plain)
    assert safe.plain.endswith("\nnext line") and safe.plain.startswith("GPU0 ")
    assert {str(span.style) for span in safe.spans} <= {"bold", "red", "dim"}


def tiny_recording(path: Path, text: str) -> Path:
    """A header, one finding and a summary, with ``text`` in every shown field."""
    header = hostile_header(json.loads(SOURCE.read_text(encoding="utf-8").splitlines()[0]), text)
    finding = {"id": "f-1", "kind": "input_bound", "state": "open", "severity": "warning", "title": text, "since": 1.0, "advice": [text]}
    summary = {
        "type": "summary",
        "window": "all",
        "duration_s": 3.0,
        "samples": 0,
        "outcome": {"kind": "exited", "ok": True, "message": text},
        "findings": [finding],
    }
    return write_lines(path, [header, {"type": "event", "t": 1.0, "event": "finding", **finding}, summary])


@settings(PROPERTY, max_examples=30)  # a recording written, read and shown by five faces each time
@given(hostile_text)
@example(HOSTILE)
def test_every_face_escapes_any_text_from_a_recording(text):
    with tempfile.TemporaryDirectory() as folder:
        recording = load_recording(tiny_recording(Path(folder) / "a.jsonl", text))
        other = load_recording(tiny_recording(Path(folder) / "b.jsonl", "plain"))
        assert_inert_markdown(markdown_report(recording))
        page = to_html(report_blocks(recording), "t", Path(folder))
        assert_no_raw_control(page)
        assert "<script" not in page.lower()
        header, rows = compare_rows([recording, other])
        assert_no_raw_control(text_table(header, rows))
        assert_inert_markdown(markdown_table(header, rows))
        assert_no_formula([for_csv_cell(cell) for row in [header, *rows] for cell in row])
        assert_no_raw_control(runs_table([read_kept_run(recording.path)]))
