"""Data-parallel runs: ranks report through the protocol with their rank, gputui adds
them into the run's throughput and keeps each rank's own, judges scaling against a
one-GPU baseline, and flags a straggler (a slow rank, or one GPU throttled)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from gputui import protocol
from gputui.diagnosis import replay_recording
from gputui.errors import UserError
from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.recording import read_recording
from gputui.record.schema import Baseline, RankRate, Scaling, Summary, ThroughputSummary
from gputui.run.throughput import ThroughputParser
from gputui.session.baseline import baseline_from_recording
from gputui.session.progress import summary_table
from gputui.session.summary import SummaryBuilder, scaling_efficiency
from tests.support.lookback import TRACES
from tests.support.records import make_header, make_summary, throughput_of

SCALING_TRACES = TRACES / "scaling"


# --- the protocol ---------------------------------------------------------------------


def test_a_rank_says_which_it_is_on_every_line_and_a_single_process_does_not():
    out = io.StringIO()
    protocol.Emitter(out, rank=1, world_size=2).step("measure", 3, 32, 0.1)
    assert protocol.decode(out.getvalue()) == {"event": "step", "phase": "measure", "step": 3, "samples": 32, "seconds": 0.1, "rank": 1, "world_size": 2}
    out = io.StringIO()
    protocol.Emitter(out, rank=0, world_size=1).step("measure", 3, 32, 0.1)  # one rank: the old lines
    assert "rank" not in protocol.decode(out.getvalue())


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"RANK": "1", "WORLD_SIZE": "4"}, (1, 4)),
        ({}, (None, None)),
        ({"RANK": "0", "WORLD_SIZE": "1"}, (None, None)),
        ({"RANK": "x", "WORLD_SIZE": "2"}, (None, None)),
        ({"RANK": "2", "WORLD_SIZE": "2"}, (None, None)),
    ],
)
def test_rank_from_torchruns_environment(env, expected):
    assert protocol.rank_from_environment(env) == expected


def step_line(rank: int | None, samples: float, seconds: float, phase: str = "measure") -> str:
    fields = {"rank": rank, "world_size": 2} if rank is not None else {}
    return protocol.encode("step", phase=phase, step=1, samples=samples, seconds=seconds, **fields)


def test_the_ranks_add_into_one_reading_once_each_has_reported():
    parser = ThroughputParser()
    first = parser.feed(step_line(0, 100, 0.1))  # rank 0: 1000/s
    assert [(r.rank, r.samples_per_sec) for r in first] == [(0, 1000.0)]
    second = parser.feed(step_line(1, 100, 0.125))  # rank 1: 800/s completes the round
    assert [(r.rank, r.ranks) for r in second] == [(1, 2), (None, 2)]
    total = second[1]
    assert total.samples_per_sec == pytest.approx(1800.0) and total.phase == "measure"
    assert total.samples / total.seconds == pytest.approx(1800.0)
    assert parser.feed(step_line(0, 100, 0.1))[-1].rank == 0  # a new round: no total yet
    finals = [parser.feed(protocol.encode("result", samples_per_sec=r, rank=k, world_size=2)) for k, r in ((0, 990.0), (1, 810.0))]
    assert finals[1][-1].final and finals[1][-1].samples_per_sec == pytest.approx(1800.0) and finals[1][-1].rank is None


def test_lines_without_a_rank_read_as_before():
    (reading,) = ThroughputParser().feed(step_line(None, 100, 0.1))
    assert reading.rank is None and reading.ranks is None and reading.samples_per_sec == pytest.approx(1000.0)


# --- summary and scaling ------------------------------------------------------------------


def test_summary_has_each_ranks_median_and_the_scaling_against_one_gpu():
    builder = SummaryBuilder(baseline=Baseline(samples_per_sec=1000.0, source="one.jsonl"))
    builder.on_event(make_event(1.0, ev.PHASE, {"phase": "measure"}))
    for t, (r0, r1) in enumerate([(950.0, 850.0), (960.0, 840.0), (940.0, 860.0)]):
        builder.on_event(make_event(t, ev.RANK_THROUGHPUT, {"samples_per_sec": r0, "source": "gputui", "phase": "measure", "rank": 0, "ranks": 2}))
        builder.on_event(make_event(t, ev.RANK_THROUGHPUT, {"samples_per_sec": r1, "source": "gputui", "phase": "measure", "rank": 1, "ranks": 2}))
        builder.on_event(make_event(t, ev.THROUGHPUT, {"samples_per_sec": r0 + r1, "source": "gputui", "phase": "measure", "ranks": 2}))
    tp = throughput_of(builder.build())
    assert tp.median == 1800.0 and tp.world_size == 2
    assert tp.ranks == [RankRate(rank=0, median=950.0, readings=3), RankRate(rank=1, median=850.0, readings=3)]
    assert tp.scaling == Scaling(baseline_samples_per_sec=1000.0, baseline_source="one.jsonl", efficiency=0.9)
    text = "\n".join(summary_table(Summary(throughput=tp)))
    assert "rank 1 median" in text and "850" in text and "90% of 2× 1,000 samples/s on one (one.jsonl)" in text


def test_scaling_efficiency():
    assert scaling_efficiency(3600.0, 4, 1000.0) == 0.9
    assert scaling_efficiency(None, 4, 1000.0) is None and scaling_efficiency(3600.0, 4, None) is None


def test_a_single_gpu_recording_is_a_baseline_and_a_ddp_one_is_not(tmp_path):
    from gputui.record.recorder import Recorder

    one = tmp_path / "one.jsonl"
    recorder = Recorder(one)
    recorder.on_header(make_header(schema=1, preset={"name": "torch-resnet50-tuned"}))
    recorder.on_summary(make_summary(throughput={"median": 4678.0, "readings": 40}))
    recorder.close()
    assert baseline_from_recording(one) == Baseline(samples_per_sec=4678.0, source=str(one), preset="torch-resnet50-tuned")
    with pytest.raises(UserError, match=r"ddp_balanced.jsonl: expected a one-GPU run, got one on 2 ranks"):
        baseline_from_recording(SCALING_TRACES / "ddp_balanced.jsonl")
    cut = tmp_path / "cut.jsonl"
    cut.write_text(one.read_text().splitlines()[0] + "\n")
    with pytest.raises(UserError, match="expected a finished run with a measured throughput"):
        baseline_from_recording(cut)


# --- the straggler rule, on traces ---------------------------------------------------------


def straggler(trace: str) -> dict | None:
    found = {}
    for event in replay_recording(read_recording(SCALING_TRACES / f"{trace}.jsonl")):
        found[event.data["id"]] = event.data
    hits = [f for f in found.values() if f["kind"] == "straggler"]
    assert len(hits) <= 1
    return hits[0] if hits else None


def test_no_straggler_when_the_ranks_and_gpus_are_balanced():
    assert straggler("ddp_balanced") is None


def test_a_rank_a_fifth_slower_than_the_others_is_a_straggler_named_by_rank():
    found = straggler("ddp_straggler_rank")
    assert found is not None and found["severity"] == "warning"
    assert found["title"] == "Straggler: rank 1 runs 20% slower than the other ranks"
    assert found["evidence"]["rank"] == 1 and 19 <= found["evidence"]["slower_pct"] <= 21


def test_one_throttled_gpu_among_free_ones_is_a_straggler_named_by_gpu():
    found = straggler("ddp_throttled_gpu")
    assert found is not None and found["evidence"]["gpu"] == 1 and found["evidence"]["reasons"] == ["thermal"]
    assert found["title"].startswith("Straggler: GPU1 throttled (thermal)")
    assert "rank" not in found["evidence"]  # the ranks themselves measure alike


def test_the_scaling_traces_are_reproducible(tmp_path):
    import subprocess

    subprocess.run([sys.executable, str(SCALING_TRACES / "make_scaling_traces.py"), "--out", str(tmp_path)], check=True, capture_output=True, timeout=120)
    for path in SCALING_TRACES.glob("*.jsonl"):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


# --- presets ------------------------------------------------------------------------------


def preset(tmp_path: Path, body: str):
    path = tmp_path / "p.toml"
    path.write_text(f"[presets.dp]\n{body}\n")
    return load_file(path)["dp"]


def test_a_torch_data_parallel_preset_runs_under_torchrun(tmp_path):
    argv = preset(tmp_path, 'framework = "torch"\nmodel = "resnet50"\ndata_parallel = 4').argv()
    assert argv[:6] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4", "-m"]
    assert argv[6] == "gputui.workloads" and "--data-parallel" not in argv


def test_data_parallel_all_is_one_rank_per_gpu(tmp_path):
    argv = preset(tmp_path, 'framework = "torch"\nmodel = "resnet50"\ndata_parallel = "all"').argv()
    assert "--nproc-per-node=gpu" in argv


def test_a_tf_data_parallel_preset_asks_the_worker_for_replicas(tmp_path):
    argv = preset(tmp_path, 'framework = "tf"\nmodel = "resnet50"\ndata_parallel = 2').argv()
    assert argv[:3] == [sys.executable, "-m", "gputui.workloads"]
    assert argv[argv.index("--data-parallel") + 1] == "2"


@pytest.mark.parametrize(
    "body, message",
    [
        ('framework = "smoke"\ndata_parallel = 2', "[presets.dp].data_parallel: expected framework 'torch' or 'tf'"),
        ('framework = "torch"\nmodel = "resnet50"\ndata_parallel = 0', '[presets.dp].data_parallel: expected a whole number of 1 or more, or "all"'),
        ('framework = "torch"\nmodel = "resnet50"\ndata_parallel = "every"', '[presets.dp].data_parallel: expected a whole number of 1 or more, or "all"'),
        ('framework = "torch"\nmodel = "resnet50"\ndata_parallel = 2\nfind_max_batch = true', "[presets.dp].data_parallel: not allowed with find_max_batch"),
    ],
)
def test_bad_data_parallel_values(tmp_path, body, message):
    with pytest.raises(UserError) as err:
        preset(tmp_path, body)
    assert message in str(err.value) and str(tmp_path / "p.toml") in str(err.value)


def test_the_builtin_data_parallel_presets_load():
    from gputui.presets.preset import builtin_presets_path

    presets = load_file(builtin_presets_path())
    for name in ("torch-resnet50-tuned-ddp", "torch-bert-large-tuned-ddp", "torch-resnet50-input-bound-ddp", "tf-resnet50-mirrored"):
        assert presets[name].data_parallel is not None, name


def test_a_baseline_that_is_not_a_one_gpu_recording_stops_the_cli_with_one_line(tmp_path):
    from tests.support.process import run_gputui

    proc = run_gputui(
        ["--record", str(tmp_path / "r.jsonl"), "--preset", "smoke", "--baseline", str(SCALING_TRACES / "ddp_balanced.jsonl"), "--no-history"], tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"gputui: error: --baseline {SCALING_TRACES / 'ddp_balanced.jsonl'}: expected a one-GPU run, got one on 2 ranks"
    ]


def test_baseline_run_needs_a_data_parallel_preset(tmp_path):
    from tests.support.process import run_gputui

    proc = run_gputui(["--record", str(tmp_path / "r.jsonl"), "--preset", "smoke", "--baseline-run", "--no-history"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        ("gputui: error: --baseline-run: preset 'smoke' is not data-parallel (no data_parallel key): expected a preset such as torch-resnet50-tuned-ddp")
    ]


def test_the_one_gpu_twin_keeps_the_first_pinned_gpu(tmp_path):
    from gputui.session.baseline import one_gpu_twin

    twin = one_gpu_twin(preset(tmp_path, 'framework = "torch"\nmodel = "resnet50"\ndata_parallel = 2\ngpus = [2, 3]'))
    assert twin.data_parallel is None and twin.gpus == "2" and "torch.distributed.run" not in twin.argv()


def test_the_summary_row_says_gpu_in_the_singular_for_one_rank():
    from gputui.session.progress import rank_rows

    scaling = Scaling(efficiency=0.9, baseline_samples_per_sec=6617.0, baseline_source="b.jsonl")
    one = rank_rows(ThroughputSummary(world_size=1, ranks=[], scaling=scaling))
    two = rank_rows(ThroughputSummary(world_size=2, ranks=[], scaling=scaling))
    assert one[-1][0] == "scaling on 1 GPU" and two[-1][0] == "scaling on 2 GPUs"


def test_gloo_ranks_on_the_cpu_are_counted_as_ranks_not_gpus():
    from gputui.session.progress import summary_table

    tp = {"median": 114.0, "world_size": 2, "ranks": [], "scaling": {"efficiency": 0.57, "baseline_samples_per_sec": 100.0, "baseline_source": "s"}}
    on_cpu = "\n".join(summary_table(make_summary(throughput=tp, workload={"device": "cpu"})))
    on_gpus = "\n".join(summary_table(make_summary(throughput=tp, workload={"device": "cuda"})))
    assert "scaling on 2 ranks" in on_cpu and "GPUs" not in on_cpu
    assert "scaling on 2 GPUs" in on_gpus
