"""Looking back at recordings: ``gputui report``, ``gputui compare``, ``gputui export``.

One module per job: ``load`` (read a recording, refuse what we cannot read, rebuild
what a cut file lacks), ``facts`` (the numbers a report and a comparison show),
``document`` (Markdown and HTML from one list of blocks), ``plots`` (PNG charts),
``report``, ``compare`` and ``noise`` (is a difference real?), ``export`` (flat
tables).  The ``*_cli`` modules are the subcommands.  No Textual here.
"""

# What other packages may import (the subcommands' engines, and the noise test tune's verdict uses); tests/whole/test_package_faces.py holds them to it.
__all__ = ["compare", "document", "export", "load", "noise", "report"]
