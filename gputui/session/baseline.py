"""The one-GPU baseline a data-parallel run's scaling is judged against: taken from a
recording of the same model on one GPU (``--baseline one.jsonl``), or measured in the
same session just before (``--baseline-run``: the preset's one-GPU twin runs first)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gputui.errors import UserError
from gputui.presets.preset import Preset
from gputui.record.schema import Baseline, Summary

THIS_SESSION = "this session, one GPU"


def baseline_from_recording(path: Path) -> Baseline:
    """The samples/s, the file and its preset from a recording's summary: its measured
    throughput.  The recording must be of a run on one GPU (no data-parallel ranks); a
    UserError naming the file says what is wrong otherwise."""
    from gputui.record.recording import read_recording

    recording = read_recording(path)  # a UserError naming the file when it is not one
    baseline = baseline_from_summary(recording.summary, str(path), f"--baseline {path}")
    return dataclasses.replace(baseline, preset=recording.header.preset_name)


def baseline_from_summary(summary: Summary | None, source: str, where: str) -> Baseline:
    """The baseline in a finished run's summary; ``where`` starts the error message."""
    throughput = summary.throughput if summary is not None else None
    rate = throughput.run_figure if throughput is not None else None
    if throughput is None or rate is None or rate <= 0:
        raise UserError(f"{where}: expected a finished run with a measured throughput in its summary")
    if (throughput.world_size or 1) > 1:
        raise UserError(f"{where}: expected a one-GPU run, got one on {throughput.world_size} ranks")
    return Baseline(samples_per_sec=rate, source=source)


def check_baseline_options(baseline: Path | None, baseline_run: bool, preset: Preset | None) -> None:
    """--baseline FILE and --baseline-run, checked before anything starts: one of them,
    and --baseline-run only with a data-parallel --preset (each a one-line UserError)."""
    if baseline is not None and baseline_run:
        raise UserError("--baseline and --baseline-run: give one (a recording, or a run in this session)")
    if baseline_run:
        if preset is None:
            raise UserError("--baseline-run: expected --preset NAME (a data-parallel preset)")
        one_gpu_twin(preset)


def one_gpu_twin(preset: Preset) -> Preset:
    """The data-parallel preset as a plain one-GPU run (its first pinned GPU, if pinned)."""
    if preset.data_parallel is None:
        raise UserError(
            f"--baseline-run: preset {preset.name!r} is not data-parallel (no data_parallel key): expected a preset such as torch-resnet50-tuned-ddp"
        )
    pinned = preset.gpu_selectors()[:1]
    return dataclasses.replace(preset, name=f"{preset.name} (one GPU)", data_parallel=None, gpus=pinned[0] if pinned else None)
