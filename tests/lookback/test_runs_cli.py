"""`gputui runs`: the kept runs, newest first, from each file's header and summary line;
`gputui runs prune` by count, by age, or to the cap."""

from __future__ import annotations

import datetime as dt
import json

from gputui.record.history import read_kept_run
from tests.support.lookback import OWN_TRAINING, with_started_at
from tests.support.process import run_gputui
from tests.support.records import make_header
from tests.support.replay import cut_copy

NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def runs_folder(tmp_path):
    folder = tmp_path / "state" / "gputui" / "runs"
    folder.mkdir(parents=True)
    with_started_at(folder, "a-bert.jsonl", "torch-bert-large.jsonl", NOW - dt.timedelta(days=10))
    with_started_at(folder, "b-input-bound.jsonl", "torch-resnet50-input-bound.jsonl", NOW - dt.timedelta(days=1))
    cut = cut_copy(tmp_path)  # started now: the newest
    lines = cut.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["started_at"] = NOW.isoformat()
    (folder / "c-cut.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    (folder / "notes.jsonl").write_text("not a recording\n")
    return folder


def test_runs_lists_newest_first_with_outcome_rate_and_findings(tmp_path):
    runs_folder(tmp_path)
    result = run_gputui(["runs"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["STARTED", "PRESET", "GPU", "OUTCOME", "RATE/S", "FINDINGS", "FILE"]
    rows = [line.split() for line in lines[1:]]
    # newest first: the unreadable file (written just now: no start time to go by), the cut
    # one (started now), the input-bound one (a day ago), BERT (10 days ago)
    assert [r[-1] for r in rows] == ["notes.jsonl", "c-cut.jsonl", "b-input-bound.jsonl", "a-bert.jsonl"]
    notes, cut, input_bound, bert = rows
    assert cut[2:4] == ["torch-resnet50-input-bound", "1×"] and "cut" in cut and cut[-3:-1] == ["-", "-"]
    assert input_bound[2:] == ["torch-resnet50-input-bound", "1×", "H200", "ok", "133", "1", "b-input-bound.jsonl"]
    assert bert[-4] == "ok" and bert[2] == "torch-bert-large"
    assert "unreadable" in notes


def test_runs_json_has_every_field(tmp_path):
    folder = runs_folder(tmp_path)
    result = run_gputui(["runs", "--json"], tmp_path, timeout=60)
    data = json.loads(result.stdout)
    by_name = {d["name"]: d for d in data}
    assert by_name["b-input-bound.jsonl"]["median"] > 132 and by_name["b-input-bound.jsonl"]["findings"] == 1
    assert by_name["b-input-bound.jsonl"]["gpus"] == ["NVIDIA H200"] and by_name["b-input-bound.jsonl"]["cut"] is None
    assert by_name["c-cut.jsonl"]["outcome"] == "cut" and "incomplete" in by_name["c-cut.jsonl"]["cut"]
    assert by_name["notes.jsonl"]["problem"] == f"{folder / 'notes.jsonl'}:1: not a gputui recording line (expected a JSON object)"
    assert by_name["a-bert.jsonl"]["path"] == str(folder / "a-bert.jsonl")


def test_listing_reads_the_header_and_the_last_line_only(tmp_path, monkeypatch):
    folder = runs_folder(tmp_path)
    import gputui.record.recording

    def no_full_read(*args, **kwargs):
        raise AssertionError("the listing parsed the whole file")

    monkeypatch.setattr(gputui.record.recording, "read_recording", no_full_read)
    run = read_kept_run(folder / "b-input-bound.jsonl")
    assert run.outcome == "ok" and run.findings == 1


def test_a_recording_being_written_lists_as_running_not_cut(tmp_path):
    from gputui.record.recorder import Recorder

    recorder = Recorder(tmp_path / "live.jsonl")
    recorder.on_header(make_header({"schema": 1, "preset": {"name": "live"}, "gpus": []}))
    try:
        assert read_kept_run(tmp_path / "live.jsonl").outcome == "running"
    finally:
        recorder.close()
    assert read_kept_run(tmp_path / "live.jsonl").outcome == "cut"  # closed without a summary


def test_prune_by_count_by_age_and_bad_values(tmp_path):
    folder = runs_folder(tmp_path)
    result = run_gputui(["runs", "prune", "--older-than", "5"], tmp_path, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("removed 1 run(s)")
    assert not (folder / "a-bert.jsonl").exists() and (folder / "b-input-bound.jsonl").exists()
    result = run_gputui(["runs", "prune", "--keep", "1"], tmp_path, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("removed 2 run(s)"), result.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["notes.jsonl"]  # the newest
    for args, expected in (
        (["--keep", "-1"], "--keep: expected a number of runs of 0 or more, got -1"),
        (["--older-than", "0"], "--older-than: expected a number of days greater than 0, got 0.0"),
    ):
        result = run_gputui(["runs", "prune", *args], tmp_path, timeout=60)
        assert result.returncode == 2 and result.stderr.strip() == f"gputui: error: {expected}"


def test_no_runs_says_where_they_would_be(tmp_path):
    result = run_gputui(["runs"], tmp_path, timeout=60)
    assert result.returncode == 0
    assert result.stdout.strip() == f"no runs kept in {tmp_path / 'state' / 'gputui' / 'runs'}"
    assert run_gputui(["runs", "path"], tmp_path, timeout=60).stdout.strip() == str(tmp_path / "state" / "gputui" / "runs")


def own_job_run(folder, started):
    """A job of the user's own as today's writer keeps it: its figure is the mean over its
    training (627/s), below the median of its readings (797/s): it stalls between bursts."""
    source = OWN_TRAINING / "keras_fit-starved.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    header, summary = json.loads(lines[0]), json.loads(lines[-1])
    header["started_at"] = started.isoformat(timespec="seconds")
    summary["throughput"]["figure"] = summary["throughput"]["mean"]
    path = folder / "d-own-job.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:-1], json.dumps(summary)]) + "\n", encoding="utf-8")
    return path, summary["throughput"]


def test_the_figure_is_headed_and_named_for_what_it_holds(tmp_path):
    folder = runs_folder(tmp_path)
    _, throughput = own_job_run(folder, NOW)
    mean, median = throughput["mean"], throughput["median"]
    assert mean < 0.9 * median  # far enough apart that a mix-up shows
    result = run_gputui(["runs"], tmp_path, timeout=60)
    heading, *rows = result.stdout.splitlines()
    own = next(row for row in rows if row.endswith("d-own-job.jsonl"))
    assert "MEDIAN/S" not in heading.split()
    end = heading.index("RATE/S") + len("RATE/S")  # a right-aligned column
    assert own[:end].split()[-1] == f"{mean:,.0f}"
    by_name = {d["name"]: d for d in json.loads(run_gputui(["runs", "--json"], tmp_path, timeout=60).stdout)}
    own_json = by_name["d-own-job.jsonl"]
    assert (own_json["figure"], own_json["figure_kind"], own_json["unit"]) == (mean, "mean", "samples")
    assert own_json["median"] == median  # the median, where a median is named
    # gputui's own workload is known by the median of its timed windows; a recording from
    # before summaries carried a figure, by its median too
    bert = by_name["a-bert.jsonl"]
    assert bert["figure"] == bert["median"] is not None and bert["figure_kind"] == "median"
    cut = by_name["c-cut.jsonl"]
    assert cut["figure"] is None and cut["figure_kind"] is None and cut["median"] is None


def test_report_compare_and_export_take_a_run_by_the_name_runs_prints(tmp_path):
    """The FILE column of `gputui runs`, typed back as it stands (with or without its
    suffix), from a folder that holds no such file: each command reads the kept run."""
    runs_folder(tmp_path)
    listed = [line.split()[-1] for line in run_gputui(["runs"], tmp_path, timeout=60).stdout.splitlines()[1:]]
    assert "b-input-bound.jsonl" in listed and "a-bert.jsonl" in listed
    assert not (tmp_path / "b-input-bound.jsonl").exists()  # only the name leads to the run

    report = run_gputui(["report", "b-input-bound.jsonl"], tmp_path, timeout=60)
    assert report.returncode == 0, report.stderr
    assert "torch-resnet50-input-bound" in report.stdout

    compare = run_gputui(["compare", "a-bert.jsonl", "b-input-bound", "--csv"], tmp_path, timeout=60)
    assert compare.returncode == 0, compare.stderr
    assert "torch-bert-large" in compare.stdout and "torch-resnet50-input-bound" in compare.stdout

    export = run_gputui(["export", "b-input-bound.jsonl", "--csv", "-"], tmp_path, timeout=60)
    assert export.returncode == 0, export.stderr
    assert export.stdout.splitlines()[0].startswith("t,") and len(export.stdout.splitlines()) > 10

    missing = run_gputui(["report", "no-such-run.jsonl"], tmp_path, timeout=60)
    assert missing.returncode == 2 and missing.stderr.strip() == "gputui: error: no-such-run.jsonl: no such file"
