"""The repository as a whole: the layers and imports, packaging, install advice, the scripts, the tests' own isolation."""
