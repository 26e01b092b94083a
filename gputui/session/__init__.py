"""One run from start to summary: the options it runs with, its parts assembled, the
session that drives it, and what is made of it as it goes (summary, phases, ranks,
progress lines, the scaling baseline)."""
