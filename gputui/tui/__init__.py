"""The Textual dashboard.  Only this package imports Textual; the CLI imports it
lazily, so ``--record`` and the rest of the core run without it."""
