"""`gputui report`'s words, through the command line: a reason that holds parentheses is
not put inside more, and advice's `backticked` commands read as code in report.md and
report.html, not as literal backticks."""

from __future__ import annotations

import json

from tests.support.lookback import RECORDINGS, check_recording, power_limit_lowered, without_gpus, write_lines
from tests.support.process import run_gputui

# gputui.telemetry.nvml's words for NVML_ERROR_LIBRARY_NOT_FOUND (a machine with no driver)
NO_LIBRARY = "NVML library not found (no NVIDIA driver installed?)"
COMMAND = "py-spy dump --pid 4242"


def test_a_machine_without_a_gpu_says_why_without_nested_parentheses(tmp_path):
    path = without_gpus(RECORDINGS / "torch-resnet50.jsonl", tmp_path / "cpu.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    records[0]["gpu_unavailable_reason"] = NO_LIBRARY
    write_lines(path, records)
    result = run_gputui(["report", str(path)], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    gpu_row = next(line for line in result.stdout.splitlines() if line.startswith("| GPU |"))
    assert gpu_row == f"| GPU | none: {NO_LIBRARY} |"
    assert "))" not in result.stdout


def with_backticked_advice(tmp_path):
    """The input-bound recording with its finding's advice naming a command in backticks,
    as the diagnosis's rules write it (gputui/diagnosis/rules/busy.py)."""
    source = RECORDINGS / "torch-resnet50-input-bound.jsonl"
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    advice = [f"See where it waits: `{COMMAND}` prints every thread's stack."]
    for record in records:
        if record.get("event") == "finding":
            record["advice"] = advice
        for finding in record.get("findings") or []:  # the summary's list, which the report reads
            finding["advice"] = advice
    return write_lines(tmp_path / "advice.jsonl", records)


def test_advice_shows_a_backticked_command_as_code_in_markdown_and_html(tmp_path):
    out = tmp_path / "rep"
    result = run_gputui(["report", str(with_backticked_advice(tmp_path)), "--out", str(out), "--html"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert f"- See where it waits: `{COMMAND}` prints every thread's stack." in markdown  # a code span
    assert "\\`" not in markdown  # not escaped into literal backticks
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"<li>See where it waits: <code>{COMMAND}</code> prints every thread&#x27;s stack.</li>" in page
    assert "`" not in page


def test_a_check_tables_advice_shows_its_command_as_code(tmp_path):
    path = check_recording(
        tmp_path / "check.jsonl",
        "node-a",
        [
            power_limit_lowered(expected_source=None, advice="restore it with `sudo nvidia-smi -i 0 -pl 700`"),
        ],
        verdict="fail",
    )
    out = tmp_path / "rep"
    result = run_gputui(["report", str(path), "--out", str(out), "--html"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "| the limit was lowered; restore it with `sudo nvidia-smi -i 0 -pl 700` |" in markdown
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<td>the limit was lowered; restore it with <code>sudo nvidia-smi -i 0 -pl 700</code></td>" in page
    assert "`" not in page
