"""What a run leaves on disk: the events it is made of, the recording (writer, schema,
reader), gzip, the history of past runs, and redaction of what must not be kept."""
