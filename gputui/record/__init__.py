"""What a run leaves on disk: the events it is made of, the recording (writer, schema,
reader), gzip, the history of past runs, and redaction of what must not be kept."""

# What other packages may import (the recording's format, its writer and readers, and the run history); tests/whole/test_package_faces.py holds them to it.
__all__ = ["events", "follow", "gzip_lines", "history", "observer", "recorder", "recording", "redact", "schema"]
