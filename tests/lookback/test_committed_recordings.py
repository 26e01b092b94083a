"""Every recording committed under docs/ still reports and replays (issue 27: the
header and summary are typed objects now; the files are the same schema 1)."""

from __future__ import annotations

import pytest

from gputui.lookback.document import to_markdown
from gputui.lookback.load import load_recording
from gputui.lookback.report import report_blocks
from gputui.view.replay_player import ReplayPlayer
from tests.support.process import REPO

DOCS_RECORDINGS = sorted(p for p in REPO.glob("docs/**/*.jsonl*") if p.name.endswith((".jsonl", ".jsonl.gz")))
IDS = [str(p.relative_to(REPO / "docs")) for p in DOCS_RECORDINGS]


@pytest.mark.parametrize("path", DOCS_RECORDINGS, ids=IDS)
def test_every_committed_recording_reports_and_replays_to_its_end(path):
    recording = load_recording(path)
    text = to_markdown(report_blocks(recording))
    assert text.startswith("# gputui report: ") and ("## Checks" in text or "## Throughput" in text)
    player = ReplayPlayer(recording, speed=None)
    player.seek(player.end_t)
    run = player.state.run
    assert run is not None and run.ended
    assert run.summary == recording.summary
    assert (run.outcome_word == "cut") is (recording.summary is None)
