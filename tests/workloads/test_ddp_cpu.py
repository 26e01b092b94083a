"""A real 2-rank DistributedDataParallel run on the CPU (gloo) under torchrun, through
a data_parallel preset and the CLI: per-rank and total throughput in the recording,
and the summary's ranks and scaling against its one-rank twin run just before."""

from __future__ import annotations

import json
import os

import pytest

from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.process import REPO, run_gputui

pytest.importorskip("torch")


def test_two_gloo_ranks_report_each_and_add_up(tmp_path):
    """Through the CLI, with --baseline-run: the one-rank twin first, then the 2 ranks."""
    from tests.support.workloads import needs

    needs("mobilenetv2")
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "GPUTUI_CACHE_DIR": str(tmp_path / "cache"),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }
    path = tmp_path / "ddp.toml"
    path.write_text(
        '[presets.ddp]\nframework = "torch"\nmodel = "mobilenetv2"\nimage_size = 32\nbatch_size = 2\n'
        'steps = 3\nwarmup_steps = 1\ndevice = "cpu"\ndata_parallel = 2\ntimeout = 300\n'
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n"
    )
    assert load_file(path)["ddp"].argv()[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    proc = run_gputui(
        ["--presets", str(path), "--preset", "ddp", "--record", str(tmp_path / "r.jsonl"), "--baseline-run", "--headless", "--no-history", "--interval", "0.5"],
        tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "measuring the one-GPU baseline first: ddp (one GPU)" in proc.stderr
    rec = read_recording(tmp_path / "r.jsonl")

    (workload,) = rec.events_of(ev.WORKLOAD)  # said once, by rank 0
    assert workload.data["world_size"] == 2 and workload.data["backend"] == "gloo"
    per_rank = [e.data for e in rec.events_of(ev.RANK_THROUGHPUT) if not e.data.get("final")]
    assert {d["rank"] for d in per_rank} == {0, 1} and all(d["ranks"] == 2 for d in per_rank)
    # 3 measured steps of batch 2 on each rank (steps faster than 0.1 s share a window)
    for rank in (0, 1):
        measured = [d for d in per_rank if d["rank"] == rank and d["phase"] == "measure"]
        assert measured and sum(d["samples"] for d in measured) == 3 * 2
    totals = [e.data for e in rec.events_of(ev.THROUGHPUT) if not e.data.get("final")]
    assert totals and all(d["ranks"] == 2 for d in totals)
    finals = [e.data for e in rec.events_of(ev.RANK_THROUGHPUT) if e.data.get("final")]
    (final_total,) = [e.data for e in rec.events_of(ev.THROUGHPUT) if e.data.get("final")]
    assert final_total["samples_per_sec"] == pytest.approx(sum(d["samples_per_sec"] for d in finals))

    tp = rec.summary.throughput
    assert tp.world_size == 2 and [r.rank for r in tp.ranks] == [0, 1]
    assert all(1 <= r.readings <= 3 and r.median > 0 for r in tp.ranks)  # a window per step at most
    scaling = tp.scaling
    assert scaling.baseline_source == "this session, one GPU" and scaling.baseline_samples_per_sec > 0
    assert scaling.efficiency == pytest.approx(tp.median / (2 * scaling.baseline_samples_per_sec), rel=1e-3)
    assert "rank 1 median" in proc.stderr and "scaling on 2 ranks" in proc.stderr  # the summary printed (gloo ranks on the CPU)
