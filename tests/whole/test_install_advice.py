"""Install advice never sends anyone to the package index for a package named gputui:
gputui is not published there, and whoever registers the name would have their
package installed by that advice.  Advice installs from the checkout (``pip install
-e '.[torch]'``) or names the real dependency (``pip install pyarrow``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.process import REPO

SCANNED = ["gputui/**/*.py", "docs/**/*.md", "README.md", "scripts/**/*", "tests/**/*.py", "pyproject.toml"]
PIP_INSTALL = re.compile(r"pip3?\s+install\s+([^`&;|\n)]*)")
GPUTUI_FROM_INDEX = re.compile(r"gputui(\[[^\]]*\])?([<>=!~].*)?", re.IGNORECASE)


def scanned_files() -> list[Path]:
    here = Path(__file__).resolve()
    files = {path for pattern in SCANNED for path in REPO.glob(pattern) if path.is_file() and path.suffix != ".pyc"}
    return sorted(files - {here})


def index_installs_of_gputui(text: str) -> list[str]:
    """Each ``pip install`` whose requirements name gputui (with or without extras)."""
    found = []
    for match in PIP_INSTALL.finditer(text):
        names = [token.strip("'\"") for token in match.group(1).split()]
        if any(GPUTUI_FROM_INDEX.fullmatch(name) for name in names):
            found.append(match.group(0).strip())
    return found


def test_the_scanner_finds_index_advice_and_passes_checkout_advice():
    assert index_installs_of_gputui("fix: pip install 'gputui[torch]'") == ["pip install 'gputui[torch]'"]
    assert index_installs_of_gputui("python3 -m pip install -U gputui && gputui check") == ["pip install -U gputui"]
    assert index_installs_of_gputui("pip install -e '.[parquet]' in gputui's folder; pip install pyarrow") == []
    assert index_installs_of_gputui('python3 -m pip install ".[torch]" && gputui check') == []


def test_no_source_or_doc_advises_installing_gputui_from_the_index():
    offenders = [
        f"{path.relative_to(REPO)}: {advice}"
        for path in scanned_files()
        for advice in index_installs_of_gputui(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == []
