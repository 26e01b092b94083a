"""Strings from outside gputui, as Hypothesis makes them, through every face that shows
them.  A GPU's name as NVML gives it, another user's process on the GPU as NVML and
psutil name it (its name, its command line, its user), the machine's hostname and the
unit a run's output names its rate in reach:

- ``gputui check``: its progress lines and its verdict on a UTF-8 terminal, the
  ``--markdown`` file, the ``--json``;
- ``gputui report`` of a run on that GPU: its Markdown, its HTML and its plots;
- the dashboard: the GPU processes view (p), the findings view (f), the Check screen's
  table and note and a kept check's; and, for a few worst cases, the whole screen through
  Pilot, with a real process of the test's named by its own command line;
- ``gputui fleet report`` of the node that ran the check, its plot too.

The property, for each: no raw control character (C0, C1, DEL, line separators, bidi
controls, lone surrogates) reaches a terminal, a document or a widget; no live Markdown,
HTML or Rich markup; the face still reads (its JSON parses, its table keeps its rows, its
HTML its tags); no traceback; and the stranger is still named.  The GPU comes through the
fake NVML and gputui's own attribution (tests/support/outside_text.py); the findings
through the real diagnosis; the recording through the real recorder.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputui.check import verdict_text as render
from gputui.check.micro_stage import grade_micro
from gputui.check.preflight_gpu import grade_gpu, read_gpu_facts
from gputui.check.result import CheckResult
from gputui.check.stage_context import gpus_under_test
from gputui.check.under_load import LoadWatcher, load_results
from gputui.cli.check_headless import ProgressLines
from gputui.diagnosis.engine import replay
from gputui.fleet.peers import load_report
from gputui.fleet.report_files import blocks as fleet_blocks
from gputui.fleet.report_files import plot as fleet_plot
from gputui.fleet.report_files import terminal_lines
from gputui.fleet.report_files import to_json as fleet_json
from gputui.fmt import printable
from gputui.lookback.document import to_html, to_markdown
from gputui.lookback.load import load_recording
from gputui.lookback.report import markdown_report, report_blocks, write_report
from gputui.model import HostInfo, HostSample, ProcessSample, Sample
from gputui.record import events as ev
from gputui.record.events import Event, make_event
from gputui.record.recorder import Recorder
from gputui.record.schema import CheckSettings, Header, PresetRecord
from gputui.safe_write import write_atomic
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.nvml import Nvml
from tests.support.check_gpus import micro
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.outside_text import RUN_PID, THEIR_PID, Stranger, assert_inert_markdown, assert_no_raw_control, outside, raw_screen, shared_gpu

PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECONDS = 30  # long enough for the co_tenant finding to open
GIB = 1024**3

strangers = st.builds(
    Stranger,
    name=outside,
    argv=st.tuples(outside, outside.map(lambda s: s + ".py"), st.just("--token"), outside),  # program, script, an argument
    user=st.one_of(st.none(), outside),
)
# The worst of each kind at once: an OSC title, an 8-bit CSI, a byte that is no UTF-8
# (psutil's surrogate), Rich markup that would not parse, HTML, math text.
WORST = "\x1b]0;PWNED\x07\x9b2J\udcff[/link]<script>alert(1)</script>$\\x$**b**"
WORST_STRANGER = Stranger(WORST, (WORST, "[x](javascript:y)`c`\udc9b.py", "--token", WORST), WORST)
PLAIN = ("NVIDIA H200", Stranger("python", ("python", "hog.py"), "alice"), "box", "samples")


@dataclasses.dataclass
class World:
    """A check and a run on a GPU shared with a stranger, every name outside gputui's."""

    check_header: Header
    run_header: Header
    samples: list[Sample]
    results: list[CheckResult]  # the check's
    events: list[Event]  # the run's: started, readings, and the diagnosis's findings


def world(gpu_name: str, stranger: Stranger, hostname: str, unit: str) -> World:
    infos, samples = shared_gpu(gpu_name, stranger, SECONDS)
    for sample in samples:  # the run's own process, named as its command line names it
        sample.host = HostSample(cpu_percent=50.0, processes=[ProcessSample(pid=RUN_PID, name=stranger.name, role="main", cpu_percent=90.0)])
    watcher = LoadWatcher()
    watcher.begin()
    for sample in samples:
        watcher.on_sample(sample)
    gpus = gpus_under_test(infos, None)
    nvml = Nvml(FakeNvml([FakeGpu(name=gpu_name)]))
    assert nvml.init() is None
    results = grade_gpu(read_gpu_facts(nvml, nvml.call("nvmlDeviceGetHandleByIndex", 0)), gpus[0])  # names the GPU it has no datasheet for
    results += grade_micro([micro("matmul_bf16", 500.0, gpu=0)], gpus, co_runners=watcher.co_runners_text)  # a slow matmul names the co-runners
    results += load_results(watcher, gpus)
    host = HostInfo(hostname=hostname, os="Linux", cpu_model=hostname, cpu_logical=16)
    check_header = Header(schema=1, gputui="test", started_at="2026-01-01T00:00:00+00:00", interval=1.0, host=host, gpus=infos, check=CheckSettings(quick=True))
    run_header = dataclasses.replace(check_header, check=None, preset=PresetRecord(name="train"), command=["python", "train.py"])
    events = [make_event(0.0, ev.STARTED, {"pid": RUN_PID, "command": ["python", "train.py"]})]
    events += [make_event(t + 0.5, ev.THROUGHPUT, {"samples_per_sec": 100.0 + t % 3, "source": "parsed", "unit": unit}) for t in range(SECONDS)]
    events += replay(run_header, samples, events)
    return World(check_header, run_header, samples, results, events)


def record(w: World, path: Path) -> Path:
    """The run as the recorder writes it: the header, samples and events in time order, the summary."""
    builder, recorder = SummaryBuilder(), Recorder(path)
    for observer in (builder, recorder):
        observer.on_header(w.run_header)
    items = sorted([(s.t, 1, i, s) for i, s in enumerate(w.samples)] + [(e.t, 0, i, e) for i, e in enumerate(w.events)], key=lambda x: x[:3])
    for _t, is_sample, _i, item in items:
        if is_sample:
            builder.on_sample(item)
            recorder.on_sample(item)
        else:
            recorder.on_event(builder.counted(item))
    recorder.on_summary(builder.build())
    recorder.close()
    return path


def named(text: str) -> bool:
    """Whether ``text`` names the stranger's process (its pid: the rest is theirs)."""
    return f"pid {THEIR_PID}" in text


# --- gputui check -------------------------------------------------------------------------


@PROPERTY
@given(gpu_name=outside, stranger=strangers, hostname=outside)
@example(gpu_name=WORST, stranger=WORST_STRANGER, hostname=WORST)
def test_the_checks_faces_show_outside_strings_as_text(gpu_name, stranger, hostname):
    w = world(gpu_name, stranger, hostname, "samples")
    # the progress lines and the verdict, as the headless check prints them to a UTF-8 terminal
    terminal = io.BytesIO()
    stream = io.TextIOWrapper(terminal, encoding="utf-8", errors="strict", write_through=True)
    lines = ProgressLines(stream, verbose=True)
    lines.on_stage("preflight", "start")
    for result in w.results:
        lines.on_result(result)
    print(render.verdict_line(w.results), file=stream)
    shown = terminal.getvalue().decode("utf-8")
    assert_no_raw_control(shown)
    assert named(shown) and "[WARN] gpu0 Other processes under load" in shown
    # --markdown, written as the check writes it
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder, "check.md")
        write_atomic(file, render.markdown(w.results, w.check_header))
        document = file.read_text(encoding="utf-8")
    parsed = assert_inert_markdown(document, own=frozenset({"strong_open"}))
    strong = [child for block in parsed for child in block.children or [] if child.type == "strong_open"]
    assert len(strong) == 1  # gputui's own: the verdict
    assert sum(t.type == "tr_open" for t in parsed) == len(w.results) + 1  # the table keeps a row per check
    assert named(document)
    # --json: the names kept as data, every character outside ASCII escaped
    text = render.to_json(w.results, w.check_header, render.verdict_summary(w.results))
    assert text.isascii()
    data = json.loads(text)
    as_json = json.loads(json.dumps([hostname, gpu_name or "GPU 0", [r.detail for r in w.results]]))  # JSON pairs up adjacent surrogates
    assert [data["header"]["host"]["hostname"], data["header"]["gpus"][0]["name"], [c.get("detail") for c in data["checks"]]] == as_json


# --- gputui report --------------------------------------------------------------------------


def tags(page: str) -> set[str]:
    return set(re.findall(r"<(/?[A-Za-z!][A-Za-z0-9]*)", page))


@functools.cache
def plain_world() -> World:
    return world(*PLAIN)


@functools.cache
def plain_report_tags() -> frozenset[str]:
    """The HTML tags of the same report with ordinary names."""
    with tempfile.TemporaryDirectory() as folder:
        recording = load_recording(record(plain_world(), Path(folder, "run.jsonl")))
        return frozenset(tags(to_html(report_blocks(recording), "report", Path(folder))))


@settings(PROPERTY, max_examples=30)  # a run of 30 samples recorded, read back and reported each time
@given(gpu_name=outside, stranger=strangers, hostname=outside, unit=outside)
@example(gpu_name=WORST, stranger=WORST_STRANGER, hostname=WORST, unit=WORST)
def test_the_report_of_a_run_shows_outside_strings_as_text(gpu_name, stranger, hostname, unit):
    w = world(gpu_name, stranger, hostname, unit)
    with tempfile.TemporaryDirectory() as folder:
        recording = load_recording(record(w, Path(folder, "run.jsonl")))
        markdown = markdown_report(recording)
        page = to_html(report_blocks(recording), f"gputui report: {hostname}", Path(folder))
    assert_inert_markdown(markdown)
    assert named(markdown)  # the co_tenant finding names the stranger
    assert_no_raw_control(page)
    assert "<script" not in page.lower() and tags(page) == plain_report_tags()


@settings(PROPERTY, max_examples=4)  # each example draws a run report's six PNGs and a fleet's: 3 s
@given(gpu_name=outside, stranger=strangers, hostname=outside, unit=outside)
@example(gpu_name=WORST, stranger=WORST_STRANGER, hostname=WORST, unit=WORST)
def test_the_plots_label_outside_strings_as_text(gpu_name, stranger, hostname, unit):
    w = world(gpu_name, stranger, hostname, unit)
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recording = load_recording(record(w, Path(folder, "run.jsonl")))
        written, plots = write_report(recording, Path(folder, "out"), html=True)
        page = Path(folder, "out", "report.html").read_text(encoding="utf-8")
        fleet = fleet_of(w, hostname, Path(folder, "fleet"))
        drawn = fleet_plot(fleet, "micro.matmul_bf16", "bf16 matmul", Path(folder, "fleet"))
        assert drawn is not None and Path(folder, "fleet", drawn).stat().st_size > 1000
        assert {p.name for p in plots if p.file} >= {"cpu_roles", "vram"}  # and the throughput's, where its unit is the summary's
    for shown in [*(entry for p in plots for entry in p.legend or []), *(str(c.message) for c in caught)]:
        assert_no_raw_control(shown)
    assert_no_raw_control(page)


# --- the dashboard --------------------------------------------------------------------------


@PROPERTY
@given(gpu_name=outside, stranger=strangers, hostname=outside)
@example(gpu_name=WORST, stranger=WORST_STRANGER, hostname=WORST)
def test_the_dashboards_views_show_outside_strings_as_text(gpu_name, stranger, hostname):
    from rich.text import Text

    from gputui.tui.screens.check import detail_line, styled_rows
    from gputui.tui.screens.findings_screen import finding_text
    from gputui.tui.screens.processes_screen import processes_text
    from gputui.view.session_news import EventArrived, HeaderArrived, SampleArrived
    from gputui.view.state import DashboardState
    from gputui.view.supervisor import SessionTicket
    from tests.support.tui import demo_preset

    w = world(gpu_name, stranger, hostname, "samples")
    state = DashboardState()
    ticket = SessionTicket(serial=1, preset=demo_preset(), run=1)
    state.session_started(ticket)
    state.apply(ticket, [HeaderArrived(w.run_header), *(SampleArrived(s) for s in w.samples), *(EventArrived(e) for e in w.events)])
    listing = processes_text(state)
    assert f"{THEIR_PID}  other" in listing.plain
    findings = list(state.findings().values())
    assert any(f.kind == "co_tenant" and named(f.title or "") for f in findings)
    shown: list[Text] = [listing, *(finding_text(f) for f in findings)]
    shown += [cell for row in styled_rows(w.results) for cell in row]  # the Check screen's table, a kept check's
    shown += [detail_line(r) for r in w.results]  # the note under either table
    for text in shown:
        assert isinstance(text, Text)
        assert_no_raw_control(text.plain)


# A process of the test's whose command line holds the worst: its argv[0] and its script's
# name, as bytes (0xff and 0x9b are no UTF-8).  psutil reads them from /proc.
REAL_ARGV0 = b"\x1b]0;PWNED\x07\x9b2J\xff[b]x[link=javascript:y]<script>alert(1)<\\script>$\\x$**b**"  # no "/": all of it is the program's name
REAL_SCRIPT = b"[x](javascript:y)\xfe\x1b[2J.py"


@pytest.fixture
def real_stranger():
    """A process named by its own command line, there for the test's length."""
    process = subprocess.Popen([REAL_ARGV0, "-c", "import time; time.sleep(120)", REAL_SCRIPT], executable=sys.executable)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("size", [(140, 45), (80, 24)])
def test_the_dashboard_shows_a_real_strangers_command_and_a_hostile_gpu_name_as_text(real_stranger, tmp_path, size):
    """The whole screen, through Pilot: the GPU panel or row named by NVML, the GPU
    processes view listing the real process as psutil reads it, and the findings view
    with the diagnosis's co_tenant finding."""
    from gputui.model import to_dict
    from gputui.tui.screens.findings_screen import FindingsScreen
    from gputui.tui.screens.processes_screen import GpuProcessesScreen
    from tests.support.dashboard import make_dashboard
    from tests.support.tui import demo_preset, run_async, scripted_factory, shown, wait_until

    w = world(WORST, WORST_STRANGER, WORST, "samples")
    # as the run's session sends them while they are open (replay's last updates close them)
    findings = [to_dict(e.payload) for e in w.events if isinstance(e.payload, ev.Finding) and e.payload.state == "open"]
    gpus = [FakeGpu(name=WORST, processes=[(real_stranger.pid, 20 * GIB)])]
    preset = demo_preset()

    async def scenario() -> None:
        app = make_dashboard(
            {preset.name: preset},
            session_factory=scripted_factory(gpus=gpus, findings=findings),
            start_preset=preset.name,
            settings_file=tmp_path / "s.toml",
            user_themes_dir=tmp_path / "none",
        )
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: app.state.run and app.state.open_findings() and app.state.gpus[0].processes, what="run, finding, processes")
            await shown(pilot)
            screen = raw_screen(app)
            assert_no_raw_control(screen)
            assert "\x1b]" not in app.title + app.sub_title
            assert "PWNED" in screen or size == (80, 24)  # the GPU's name, where there is room for it
            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, GpuProcessesScreen), what="GPU processes view")
            await shown(pilot)
            screen = raw_screen(app)
            assert_no_raw_control(screen)
            assert str(real_stranger.pid) in screen and "PWNED" in screen, screen  # listed, escaped
            await pilot.press("escape")
            await pilot.press("f")
            await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), what="findings view")
            await shown(pilot)
            screen = raw_screen(app)
            assert_no_raw_control(screen)
            assert f"pid {THEIR_PID}" in screen

    run_async(scenario())


def test_the_check_screen_shows_a_co_tenants_and_a_gpus_names_as_text(tmp_path):
    """The Check screen, through Pilot: its table filled by a quick check whose results
    name the stranger and the GPU (Textual reads a table's string cells as markup: an
    unmatched ``[/link]`` raised), and the highlighted row's note below it."""
    from gputui.check.check_run import CheckRun
    from gputui.presets.preset import load_presets
    from gputui.telemetry.gpu import GpuTelemetry
    from gputui.tui.screens.check import CheckScreen
    from tests.support.dashboard import make_dashboard
    from tests.support.tui import run_async, shown, wait_until

    w = world(WORST, WORST_STRANGER, WORST, "samples")

    def check(options, listener):
        stages = {"preflight": lambda ctx: [ctx.report(r) for r in w.results]}
        return CheckRun(
            options, listener=listener, gpu=GpuTelemetry(FakeNvml([FakeGpu(name=WORST)])), nvml_module=FakeNvml([FakeGpu(name=WORST)]), stages=stages
        )

    async def scenario() -> None:
        app = make_dashboard(
            load_presets(cwd=tmp_path),
            settings_file=tmp_path / "s.toml",
            interval=0.25,
            gpu_factory=lambda: GpuTelemetry(FakeNvml([FakeGpu(name=WORST)])),
            check_factory=check,
        )
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.press("k")
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="Check screen")
            await pilot.press("u")
            await wait_until(pilot, lambda: screen.verdict is not None, what="verdict")
            table = screen.query_one("#check-table")
            co_runners = next(i for i, r in enumerate(w.results) if r.id == "gpu0.co_runners")
            table.move_cursor(row=co_runners)
            await shown(pilot)
            shown_text = raw_screen(app)
            assert_no_raw_control(shown_text)
            assert f"pid {THEIR_PID}" in shown_text and "[/link]" in shown_text  # named, the markup as typed

    run_async(scenario())


# --- gputui fleet report --------------------------------------------------------------------


def fleet_of(w: World, hostname: str, folder: Path):
    """The fleet report of the node that ran the check (its ``check --json`` as the fleet
    keeps it) and of an ordinary one."""
    folder.mkdir()
    check, ordinary = (json.loads(render.to_json(x.results, x.check_header, render.verdict_summary(x.results))) for x in (w, plain_world()))
    for i, (node, result) in enumerate(((hostname, check), ("ordinary", ordinary))):
        record = {"fleet_node": 1, "node": node, "status": result["verdict"]["verdict"], "check": result}
        Path(folder, f"n{i}.json").write_text(json.dumps(record), encoding="utf-8")
    return load_report([folder])


@PROPERTY
@given(gpu_name=outside, stranger=strangers, hostname=outside)
@example(gpu_name=WORST, stranger=WORST_STRANGER, hostname=WORST)
def test_a_fleet_report_of_the_checked_node_shows_outside_strings_as_text(gpu_name, stranger, hostname):
    w = world(gpu_name, stranger, hostname, "samples")
    with tempfile.TemporaryDirectory() as folder:
        report = fleet_of(w, hostname, Path(folder, "fleet"))
    assert len(report.nodes) == 2
    lines = terminal_lines(report)
    for line in lines:
        assert_no_raw_control(line)
    assert all(printable(node.name) in "\n".join(lines) for node in report.nodes)
    assert_inert_markdown(to_markdown(fleet_blocks(report, [])))
    assert json.dumps(fleet_json(report), allow_nan=False).isascii()
