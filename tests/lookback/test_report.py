"""gputui report: the Markdown content, the plots read back pixel by pixel, HTML, and the CLI."""

from __future__ import annotations

import json
import re

import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from gputui.check.result import CheckResult
from gputui.errors import UserError
from gputui.lookback.load import load_recording, measured_rates
from gputui.lookback.plots import DATA_COLOURS, LIMIT_COLOUR, MEDIAN_COLOUR, WARN_COLOUR
from gputui.lookback.report import markdown_report, write_report
from gputui.stats import median
from tests.support.lookback import OWN_TRAINING, RECORDINGS, TRACES, check_recording, cut_copy, power_limit_lowered, without_gpus, write_lines
from tests.support.process import run_gputui
from tests.support.records import throughput_of


def colour_share(image, row: int, left: int, right: int, colour: str, tol: float = 0.15) -> float:
    """Share of the columns left..right where a pixel within a row of ``row`` has ``colour``."""
    target = to_rgb(colour)
    hits = 0
    for col in range(left, right):
        for r in (row - 1, row, row + 1):
            pixel = image[r, col, :3]
            if all(abs(float(pixel[i]) - target[i]) <= tol for i in range(3)):
                hits += 1
                break
    return hits / (right - left)


def colour_near(image, col: int, row: int, colour: str, radius: int = 3, tol: float = 0.2) -> bool:
    target = to_rgb(colour)
    for r in range(row - radius, row + radius + 1):
        for c in range(col - radius, col + radius + 1):
            if all(abs(float(image[r, c, i]) - target[i]) <= tol for i in range(3)):
                return True
    return False


def inner_columns(plot) -> tuple[int, int]:
    left, _bottom, right, _top = plot.axes.box
    return int(left) + 3, int(right) - 3


# --- content ---------------------------------------------------------------------


def test_report_of_an_input_bound_run_says_what_ran_how_fast_and_why():
    text = markdown_report(load_recording(RECORDINGS / "torch-resnet50-input-bound.jsonl"), price_per_hour=2.5)
    assert text.startswith("# gputui report: torch-resnet50-input-bound")
    assert "cut" not in text.split("\n## ")[0].lower()
    assert "| GPU | 1× NVIDIA H200 (140.4 GiB), driver 580.159.04 |" in text
    assert "| Preset | torch-resnet50-input-bound |" in text
    assert "--workers 1 --augment heavy" in text
    assert "exited with code 0" in text
    # The summary's median 132.92 and p5/p95 119.9/140.1; 1.325 J a sample.
    assert "| Median | 133 samples/s |" in text
    assert "| p5 – p95 | 120 – 140 samples/s |" in text
    assert "| Energy per sample | 1.33 J |" in text
    # $2.50/h at 132.92 samples/s: 2.5 / 3600 / 132.92 * 1e6 = $5.22
    assert "| Cost per million samples | $5.22 at $2.50/hour |" in text
    # The workload's own peak (torch.cuda.max_memory_allocated) beside NVML's.
    assert "The workload's own peak | 10.2 GiB (torch.cuda.max_memory_allocated)" in text
    assert re.search(r"GPU0 peak, NVML .*\| 7\.6 GiB", text)
    assert "### warning: Input-bound: GPU SM activity 12%" in text
    assert "gpu_sm_active_pct = 12, " in text and "workers = 1," in text and "host_cpu_pct = 7.60" in text
    assert "- Use more data-loader workers" in text
    assert "No clock-event (throttle) reason was active" in text
    assert "## Plots" not in text  # printed to a terminal: no plots


def test_report_without_price_says_how_to_get_the_cost():
    text = markdown_report(load_recording(RECORDINGS / "torch-resnet50.jsonl"))
    assert "| Cost per million samples | - (give --price USD_PER_HOUR) |" in text


def test_report_shows_published_references_with_the_ratio():
    recording = load_recording(RECORDINGS / "torch-resnet50.jsonl")
    text = markdown_report(recording)
    # 1790.47 measured against the published 1759: x1.02
    assert "| NVIDIA H200 | 1,759 samples/s | plain eager PyTorch loop on an H200, fp32 bs32 | ×1.02 |" in text


def test_report_shows_throttle_shares_and_rediagnoses_a_recording_made_without_diagnosis():
    text = markdown_report(load_recording(TRACES / "thermal_crossing.jsonl"))
    assert "| GPU0 | SwThermalSlowdown | 25% |" in text
    assert "replayed over its samples" in text
    assert re.search(r"### critical: GPU0 thermal throttling", text)


def test_a_run_without_a_gpu_says_throttling_was_not_measured(tmp_path):
    text = markdown_report(load_recording(without_gpus(RECORDINGS / "torch-resnet50.jsonl", tmp_path / "cpu.jsonl")))
    throttling = text.split("## Throttling")[1].split("\n## ")[0]
    assert "Not measured" in throttling and "no GPU" in throttling
    assert "No clock-event" not in throttling  # "no throttling" would claim a GPU ran unthrottled


def test_a_cut_recording_says_so_at_the_top_and_rebuilds_its_figures(tmp_path):
    cut = cut_copy(RECORDINGS / "torch-resnet50-input-fed.jsonl", tmp_path / "cut.jsonl")
    recording = load_recording(cut)
    text = markdown_report(recording)
    title, note = text.split("\n\n")[:2]
    assert note.startswith("> **This recording was cut**: the last line")
    # No summary line: the median comes from the readings the file holds.
    rates = measured_rates(recording)
    assert 0 < len(rates) < 200
    from gputui.fmt import rate

    assert f"| Median | {rate(median(rates))} samples/s |" in text


def test_a_check_recording_shows_the_check_table_instead_of_throughput(tmp_path):
    path = check_recording(
        tmp_path / "check.jsonl",
        "node-a",
        [
            power_limit_lowered(),
            CheckResult(id="host.disk", group="preflight", name="disk read", status="skipped", cause="no fio"),
        ],
        verdict="fail",
    )
    text = markdown_report(load_recording(path))
    assert "## Throughput" not in text
    assert "Verdict: **fail**." in text
    assert "| preflight | power limit | fail | 450 W | 700 W (datasheet) | ×0.64 | the limit was lowered; ask the provider |" in text
    assert "| preflight | disk read | skipped | - | - | - | no fio |" in text


# --- plots, read back ----------------------------------------------------------------


def test_throughput_plot_draws_the_median_line_at_the_median(tmp_path):
    recording = load_recording(RECORDINGS / "torch-resnet50-input-bound.jsonl")
    _written, plots = write_report(recording, tmp_path)
    plot = next(p for p in plots if p.name == "throughput")
    image = imread(tmp_path / plot.file)
    assert image.shape[0] == plot.axes.height
    left, right = inner_columns(plot)
    median_value = throughput_of(recording.summary).median
    assert colour_share(image, plot.axes.row_of(median_value), left, right, MEDIAN_COLOUR) > 0.6
    # ...and nowhere else: halfway between the median and the top there is no red line.
    elsewhere = plot.axes.row_of((median_value + plot.axes.ylim[1]) / 2)
    assert colour_share(image, elsewhere, left, right, MEDIAN_COLOUR) < 0.05
    # The readings themselves: the warm-up peak reading sits where the data says.
    peak = max(recording.events_of("throughput"), key=lambda e: e.data["samples_per_sec"])
    assert colour_near(image, *plot.axes.to_pixel(peak.t, peak.data["samples_per_sec"]), DATA_COLOURS[0])


def test_temperature_plot_draws_80c_and_the_slowdown_line_and_the_data(tmp_path):
    recording = load_recording(TRACES / "thermal_crossing.jsonl")
    _written, plots = write_report(recording, tmp_path)
    plot = next(p for p in plots if p.name == "temperature")
    image = imread(tmp_path / plot.file)
    left, right = inner_columns(plot)
    assert colour_share(image, plot.axes.row_of(80.0), left, right, WARN_COLOUR) > 0.3  # dashed
    assert colour_share(image, plot.axes.row_of(89.0), left, right, LIMIT_COLOUR) > 0.3  # the header's 89 °C
    assert colour_share(image, plot.axes.row_of(50.0), left, right, WARN_COLOUR) < 0.02
    hottest = max(recording.samples, key=lambda s: s.gpus[0].temp_c)
    assert colour_near(image, *plot.axes.to_pixel(hottest.t, hottest.gpus[0].temp_c), DATA_COLOURS[0])
    coolest = min(recording.samples, key=lambda s: s.gpus[0].temp_c)
    assert colour_near(image, *plot.axes.to_pixel(coolest.t, coolest.gpus[0].temp_c), DATA_COLOURS[0])


def test_power_plot_draws_the_limit(tmp_path):
    recording = load_recording(TRACES / "power_capped.jsonl")
    _written, plots = write_report(recording, tmp_path)
    plot = next(p for p in plots if p.name == "power")
    image = imread(tmp_path / plot.file)
    limit = recording.samples[-1].gpus[0].power_limit_w
    left, right = inner_columns(plot)
    assert colour_share(image, plot.axes.row_of(limit), left, right, LIMIT_COLOUR) > 0.3


def test_every_plot_is_written_and_referenced_from_report_md(tmp_path):
    written, plots = write_report(load_recording(RECORDINGS / "torch-resnet50-input-bound.jsonl"), tmp_path)
    assert [p.name for p in plots] == ["throughput", "utilization", "temperature", "power", "sm_clock", "vram", "cpu_roles"]
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    for plot in plots:
        assert plot.file and (tmp_path / plot.file) in written
        assert f"![{plot.title}]({plot.file})" in report
        assert imread(tmp_path / plot.file).shape[1] == 900


def test_a_plot_without_data_is_left_out_with_a_reason(tmp_path):
    source = (TRACES / "idle_io.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [json.loads(line) for line in source if '"event":"throughput"' not in line]
    recording = load_recording(write_lines(tmp_path / "no-rate.jsonl", kept))
    out = tmp_path / "out"
    _written, plots = write_report(recording, out)
    assert not (out / "throughput.png").exists()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "### Throughput over time\n\nLeft out: no throughput readings in the recording." in report
    assert (out / "temperature.png").exists()


def test_html_report_is_self_contained(tmp_path):
    written, plots = write_report(load_recording(RECORDINGS / "torch-resnet50.jsonl"), tmp_path, html=True)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == sum(1 for p in plots if p.file)
    assert '.png"' not in page
    assert "<td>Median</td><td>1,790 samples/s</td>" in page
    assert "<code>/opt/torch/.venv/bin/python3 -m gputui.workloads" in page


def test_unwritable_out_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match=r"^--out .*file/sub: cannot write the report"):
        write_report(load_recording(RECORDINGS / "torch-resnet50.jsonl"), blocker / "sub")


# --- the CLI --------------------------------------------------------------------------


def test_cli_prints_the_report_without_out(tmp_path):
    result = run_gputui(["report", str(RECORDINGS / "torch-resnet50.jsonl"), "--price", "3"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# gputui report: torch-resnet50\n")
    assert "at $3.00/hour" in result.stdout


def test_cli_writes_report_files_with_out_and_html(tmp_path):
    out = tmp_path / "rep"
    result = run_gputui(["report", str(RECORDINGS / "torch-resnet50.jsonl"), "--out", str(out), "--html"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert {"report.md", "report.html", "throughput.png"} <= {p.name for p in out.iterdir()}
    assert str(out / "report.md") in result.stdout.splitlines()


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", r"missing\.jsonl: no such file"),
        ("text", r"text\.jsonl:1: not a gputui recording line \(expected a JSON object\)"),
        ("newer", r"newer\.jsonl:1: recording format 99 is newer than this gputui reads \(up to 1\)"),
        ("out", r"--out .*: cannot write the report"),
        ("price", r"--price: expected a price per hour greater than 0"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, setup, message):
    fixture = RECORDINGS / "torch-resnet50.jsonl"
    args = ["report", str(tmp_path / f"{setup}.jsonl")]
    if setup == "text":
        (tmp_path / "text.jsonl").write_text("hello\n")
    elif setup == "newer":
        lines = fixture.read_text(encoding="utf-8").splitlines(keepends=True)
        header = json.loads(lines[0])
        header["schema"] = 99
        (tmp_path / "newer.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    elif setup == "out":
        (tmp_path / "blocker").write_text("x")
        args = ["report", str(fixture), "--out", str(tmp_path / "blocker" / "dir")]
    elif setup == "price":
        args = ["report", str(fixture), "--price", "-1"]
    result = run_gputui(args, tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error: "), result.stderr
    assert re.search(message, lines[0]), lines[0]


def test_lookback_is_core_and_its_subcommands_are_cheap_to_import():
    """No Textual anywhere in lookback; the CLI modules load no matplotlib, numpy or pyarrow."""
    import subprocess
    import sys

    from tests.support.process import REPO

    code = (
        "import sys\n"
        "import gputui.cli.main, gputui.cli.report_cli, gputui.cli.compare_cli, gputui.cli.export_cli\n"
        "heavy = sorted(m for m in ('matplotlib', 'numpy', 'pyarrow', 'textual') if m in sys.modules)\n"
        "import gputui.lookback.report, gputui.lookback.compare, gputui.lookback.export, gputui.lookback.plots\n"
        "tui = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]\n"
        "print(','.join(heavy) + '/' + ','.join(tui))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "/"


def test_a_batch_size_search_shows_each_batch_tried():
    text = markdown_report(load_recording(RECORDINGS / "torch-efficientnet-b7-max-batch.jsonl"))
    assert "The tool's own figure: " in text and "(no readings over time)" in text
    assert "Largest batch that fits: 76; fastest: batch 72 at 129 samples/s." in text
    assert "| 72 | yes | 129 | 130.7 GiB |" in text
    assert "| 77 | no (out of memory) | - |" in text


def _first_throughput_row(text: str) -> str:
    throughput = text[text.index("## Throughput") :]
    return next(line for line in throughput.splitlines() if line.startswith("| ") and "---" not in line and line != "|  |  |")


def test_a_job_of_the_users_is_reported_by_its_mean_and_a_bursty_one_says_why():
    """Keras (docs/own-training-results/cpu/, recorded on the 2-core VM; the summaries
    there predate the figure and are counted again).  Starved by a stalling generator, its
    script said 621 samples/s and the median of its readings (797) counts only the bursts;
    fed, it said 6,016."""
    starved = markdown_report(load_recording(OWN_TRAINING / "keras_fit-starved.jsonl"))
    assert (
        _first_throughput_row(starved)
        == "| Mean (all it did over all the time it took) | 623 samples/s (the run's figure: it stalls between bursts, which the median leaves out) |"
    )
    assert "| Median | 797 samples/s |" in starved
    fed = markdown_report(load_recording(OWN_TRAINING / "keras_fit-fed.jsonl"))
    assert _first_throughput_row(fed) == "| Mean (all it did over all the time it took) | 5,992 samples/s (the run's figure) |"


def test_a_benchmark_workload_is_reported_by_its_median():
    text = markdown_report(load_recording(RECORDINGS / "torch-resnet50.jsonl"))
    assert _first_throughput_row(text).startswith("| Median |") and "the run's figure" not in text


def test_the_throughput_plot_says_stalls_between_bursts_only_for_a_run_the_summary_calls_bursty(tmp_path):
    """Keras fed (its mean, the run's figure, is not the median, and it is not bursty)
    and starved (bursty).  Before: both plots said "(stalls between bursts)"."""
    legends = {}
    for name in ("keras_fit-fed", "keras_fit-starved"):
        _written, plots = write_report(load_recording(OWN_TRAINING / f"{name}.jsonl"), tmp_path / name)
        legends[name] = next(p for p in plots if p.name == "throughput").legend
    assert legends["keras_fit-fed"][1:] == ["median 6,197.5", "mean 5,991.6 (the run's figure)"]
    assert legends["keras_fit-starved"][1:] == ["median 797.3", "mean 623.5 (stalls between bursts)"]
    _written, plots = write_report(load_recording(RECORDINGS / "torch-resnet50.jsonl"), tmp_path / "benchmark")
    assert not any("mean" in entry for entry in next(p for p in plots if p.name == "throughput").legend)  # its figure is its median


def test_a_recording_s_own_words_reach_the_plots_escaped(tmp_path):
    """A process role with ``$\\x$`` and an OSC sequence in it (a recording is its
    writer's text).  Before: matplotlib's math-text parser raised on it."""
    role = "$\\x$\x1b]0;PWNED\x07"
    records = [json.loads(line) for line in (RECORDINGS / "h200-torch-resnet50.jsonl").read_text().splitlines()]
    for record in records:
        for process in (record.get("host") or {}).get("processes") or [] if record.get("type") == "sample" else []:
            process["role"], process["cpu_percent"] = role, 50.0
    path = write_lines(tmp_path / "hostile.jsonl", records)
    result = run_gputui(["report", str(path), "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "cpu_roles.png").stat().st_size > 1000
    assert not re.search("[\x00-\x1f\x7f-\x9f]", result.stdout.replace("\n", "") + result.stderr.replace("\n", "")), result.stderr
    _written, plots = write_report(load_recording(path), tmp_path / "again")
    assert next(p for p in plots if p.name == "cpu_roles").legend == ["\\$\\x\\$\\x1b]0;PWNED\\x07"]
