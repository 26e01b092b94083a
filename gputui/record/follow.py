"""A recording read as it is written: ``tail -f`` with the recording's own reader.

A viewer of a live run (``gputui attach``) reads the run's recording from its first line
and then whatever the recorder adds, so attaching late loses nothing and a live run and a
replay are read alike.  Each line is held to the same shapes as a whole read
(:func:`gputui.record.recording.read_header_line` and ``read_body_line``); a line still
being written waits for its newline.  The recording has ended when its summary line is
read, or when its recorder has let go of the file (:func:`is_live`) with no summary: cut.

A viewer that attaches to a long run may ask for the latest samples only
(``recent_samples``): while more than a read's worth of the file is still ahead, sample
lines are passed over unread (a viewer draws the last few minutes of samples; every
event, which the chart, findings and phases are made of, is read).  Reading and checking
a line is most of a catch-up's cost, and samples are most of the lines.
"""

from __future__ import annotations

import os
from pathlib import Path

from gputui.errors import UserError
from gputui.model import Sample
from gputui.record.events import Event
from gputui.record.gzip_lines import is_gzip_path
from gputui.record.recording import MAX_LINE_BYTES, is_live, read_body_line, read_header_line
from gputui.record.schema import Header, Summary
from gputui.text_files import open_regular_file

READ_CHUNK = 4 * 1024 * 1024  # a read's most: a long run's catch-up comes in pieces, not one allocation
SAMPLE_LINE = b'{"type":"sample",'  # how a Recorder starts a sample's line (another writer's are all read)

TailItem = Header | Sample | Event | Summary


class RecordingTail:
    """Reads ``path`` from its start, then what is added, a whole line at a time."""

    def __init__(self, path: Path, recent_samples: int | None = None) -> None:
        if is_gzip_path(path):
            raise UserError(f"{path}: a compressed recording cannot be followed while it is written")
        self.path = path
        try:
            self._file = open_regular_file(path, "recording")
        except OSError as exc:
            raise UserError(f"{path}: cannot read the recording ({exc.strerror})") from None
        self._pending = b""  # the start of a line whose newline has not been written yet
        self._line = 0
        self._recent_samples = recent_samples
        self.samples_passed_over = 0
        self.header: Header | None = None
        self.summary: Summary | None = None

    @property
    def ended(self) -> bool:
        """The summary has been read: nothing more will come."""
        return self.summary is not None

    def read(self) -> list[TailItem]:
        """The whole lines written since the last call (at most READ_CHUNK bytes of them;
        call again while it returns some), each checked and typed."""
        if self.ended or self._file.closed:
            return []
        try:
            chunk = self._file.read(READ_CHUNK)
        except OSError as exc:
            raise UserError(f"{self.path}: cannot read the recording ({exc.strerror})") from None
        if not chunk:
            return []
        data = self._pending + chunk
        end = data.rfind(b"\n")
        if end < 0:
            self._pending = data
            if len(data) > MAX_LINE_BYTES:
                raise UserError(f"{self.path}:{self._line + 1}: a line of over {MAX_LINE_BYTES:,} bytes (gputui's lines are a few KB)")
            return []
        self._pending = data[end + 1 :]
        lines = data[:end].split(b"\n")
        passed_over = self._samples_to_pass_over(lines)
        items: list[TailItem] = []
        for index, line in enumerate(lines):
            self._line += 1
            if index in passed_over:
                continue
            if self.header is None:
                self.header = read_header_line(self.path, line)
                items.append(self.header)
                continue
            item = read_body_line(f"{self.path}:{self._line}", line)
            items.append(item)
            if isinstance(item, Summary):
                self.summary = item
                break  # a recording ends with its summary
        return items

    def _samples_to_pass_over(self, lines: list[bytes]) -> set[int]:
        """The sample lines of this read that a viewer asking for recent samples will not
        draw: all of them while over a read's worth of the file is ahead, else all but
        the last ``recent_samples``."""
        if self._recent_samples is None:
            return set()
        samples = [index for index, line in enumerate(lines) if line.startswith(SAMPLE_LINE)]
        ahead = self.size() - self._file.tell()
        keep = 0 if ahead > READ_CHUNK else self._recent_samples
        passed_over = set(samples[: max(0, len(samples) - keep)])
        self.samples_passed_over += len(passed_over)
        return passed_over

    def writer_gone(self) -> bool:
        """No recorder holds the file any more.  Asked only once a read found nothing new,
        so a line written meanwhile is read before the end is believed (read again first)."""
        return not is_live(self.path)

    def size(self) -> int:
        """How many bytes the file has now."""
        try:
            return os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        self._file.close()
