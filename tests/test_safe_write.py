"""Atomic writes keep what the user set up: the file's mode, and a symlink to it."""

from __future__ import annotations

import os
import stat

from gputui.safe_write import write_atomic


def test_a_new_file_gets_the_usual_mode_and_an_existing_one_keeps_its_own(tmp_path):
    umask = os.umask(0o022)
    try:
        new = tmp_path / "report.md"
        write_atomic(new, "hello\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not mkstemp's 0600
        kept = tmp_path / "presets.toml"
        kept.write_text("old\n")
        kept.chmod(0o640)
        write_atomic(kept, "new\n")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
        assert kept.read_text() == "new\n"
    finally:
        os.umask(umask)


def test_a_symlinked_file_is_written_through_its_link(tmp_path):
    target = tmp_path / "dotfiles" / "presets.toml"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "presets.toml"
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert target.read_text() == "new\n"
