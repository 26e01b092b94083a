"""Each package has a public face, and the command line stays in gputui/cli/.

- Every package under gputui/ declares ``__all__``: the modules (or names) other packages
  may import.  An import from outside a package of anything not in its ``__all__`` fails.
- No module imports another module's ``_private`` name or ``_private`` module.
- ``argparse`` is imported only in gputui/cli/ and in modules run with ``python -m``
  (a ``__main__.py`` or a module with an ``if __name__ == "__main__":`` block), which
  parse their own arguments.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.process import REPO

PACKAGE_ROOT = REPO / "gputui"


@dataclass(frozen=True)
class ImportLine:
    path: Path  # the importing file
    line: int
    target: str  # the module imported from, or imported
    names: tuple[str, ...]  # the names taken from it (``from target import names``); () for ``import target``

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def gputui_imports(path: Path) -> list[ImportLine]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "gputui":
            lines.append(ImportLine(path, node.lineno, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            lines += [ImportLine(path, node.lineno, alias.name, ()) for alias in node.names if alias.name.startswith("gputui.")]
    return lines


def source_files(root: Path = PACKAGE_ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def top_packages(root: Path = PACKAGE_ROOT) -> list[str]:
    return sorted(p.parent.name for p in root.glob("*/__init__.py"))


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def face_breaches(files: list[Path], faces: dict[str, list[str]]) -> list[str]:
    """Imports from outside a package of what its face (``faces[package]``) does not name."""
    breaches = []
    for path in files:
        importer = module_name(path)
        for line in gputui_imports(path):
            parts = line.target.split(".")
            package = parts[1] if len(parts) > 1 else None
            if package not in faces or importer == f"gputui.{package}" or importer.startswith(f"gputui.{package}."):
                continue
            taken = [parts[2]] if len(parts) > 2 else list(line.names)
            hidden = [name for name in taken if name not in faces[package]]
            if hidden:
                breaches.append(f"{line.where()}: gputui.{package}.{', '.join(hidden)} is not in gputui/{package}/__init__.py's __all__")
    return breaches


def private_imports(files: list[Path]) -> list[str]:
    """Imports of another module's ``_name``, or of a ``_module``."""
    found = []
    for path in files:
        for line in gputui_imports(path):
            modules = [part for part in line.target.split(".") if is_private(part)]
            names = [name for name in line.names if is_private(name)]
            if modules or names:
                found.append(f"{line.where()}: {line.target} {', '.join(modules + names)}")
    return found


def runs_as_main(path: Path, tree: ast.Module) -> bool:
    if path.name == "__main__.py":
        return True
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return True
    return False


def argparse_outside_cli(files: list[Path], cli: Path) -> list[str]:
    found = []
    for path in files:
        if cli in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported = any(
            (isinstance(node, ast.Import) and any(alias.name == "argparse" for alias in node.names))
            or (isinstance(node, ast.ImportFrom) and node.module == "argparse")
            for node in ast.walk(tree)
        )
        if imported and not runs_as_main(path, tree):
            found.append(str(path.relative_to(REPO)))
    return found


def declared_faces() -> dict[str, list[str]]:
    faces = {}
    for package in top_packages():
        module = importlib.import_module(f"gputui.{package}")
        faces[package] = list(getattr(module, "__all__", None) or [])
        assert hasattr(module, "__all__"), f"gputui/{package}/__init__.py declares no __all__: what may other packages import?"
    return faces


def test_every_package_declares_its_face_and_outsiders_keep_to_it():
    faces = declared_faces()
    assert face_breaches(source_files(), faces) == []


def test_no_module_imports_another_modules_private_names():
    assert private_imports(source_files()) == []


def test_argparse_stays_in_the_command_line_and_modules_run_with_python_m():
    assert argparse_outside_cli(source_files(), PACKAGE_ROOT / "cli") == []


# The checks themselves catch what they are for (each would pass vacuously on a bug).
@pytest.fixture
def planted(tmp_path):
    root = tmp_path / "gputui"
    (root / "session").mkdir(parents=True)
    (root / "cli").mkdir()
    (root / "record").mkdir()
    (root / "session" / "__init__.py").write_text('__all__ = ["options"]\n')
    (root / "session" / "options.py").write_text("import argparse\n")
    (root / "session" / "internal.py").write_text("X = 1\n_Y = 2\n")
    (root / "record" / "__init__.py").write_text("__all__ = []\n")
    (root / "record" / "reader.py").write_text("from gputui.session.internal import X\nfrom gputui.session.options import _Y\nimport gputui.session._hidden\n")
    (root / "cli" / "main.py").write_text("import argparse\nfrom gputui.session.options import thing\n")
    (root / "session" / "tool.py").write_text('import argparse\nif __name__ == "__main__":\n    pass\n')
    return root


def test_the_checks_catch_a_planted_breach(planted, monkeypatch):
    monkeypatch.setattr("tests.whole.test_package_faces.REPO", planted.parent)
    files = source_files(planted)
    faces = {"session": ["options"], "record": []}
    assert face_breaches(files, faces) == [
        "gputui/record/reader.py:1: gputui.session.internal is not in gputui/session/__init__.py's __all__",
        "gputui/record/reader.py:3: gputui.session._hidden is not in gputui/session/__init__.py's __all__",
    ]
    assert private_imports(files) == ["gputui/record/reader.py:2: gputui.session.options _Y", "gputui/record/reader.py:3: gputui.session._hidden _hidden"]
    assert argparse_outside_cli(files, planted / "cli") == ["gputui/session/options.py"]
