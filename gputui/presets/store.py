"""Changing presets files safely: the CLI's ``presets new|edit|rm`` and the dashboard's
editor both go through :class:`PresetFile`.

- Edits go through tomlkit and touch only the keys that changed, so comments, key
  order and formatting elsewhere survive.
- Nothing invalid is written: the new text is validated exactly as loading validates
  it (:func:`gputui.presets.preset.parse_text`) before the file is touched.
- A file changed on disk since it was loaded is detected (a SHA-256 of its bytes,
  taken at load) and raises :class:`ConflictError` unless the caller forces the save.
- The write is atomic (:func:`gputui.safe_write.write_atomic`) and the previous
  version is kept next to the file as ``presets.toml.bak``.
- Writers take an advisory lock (``fcntl.flock`` on ``.presets.toml.lock`` beside the
  file) around check-and-write, and ``PresetFile.editing`` around a whole
  read-modify-write, so parallel ``presets new`` runs all land.

No Textual here.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path
from typing import Any

from gputui.errors import UserError
from gputui.presets.preset import Preset, PresetTable, builtin_presets_path, parse_text, user_presets_path
from gputui.safe_write import write_atomic
from gputui.text_files import read_text_file

NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
HEADER_COMMENT = "gputui presets (see docs/presets.md); gputui keeps comments and formatting when it edits this file"
TEMPLATE: PresetTable = {
    "description": "a new preset: the smoke workload until you pick a framework and model",
    "framework": "smoke",
    "batch_size": 256,
    "steps": 40,
    "warmup_steps": 5,
}


class ConflictError(UserError):
    """The file changed on disk since it was loaded."""


def is_builtin(path: Path) -> bool:
    return path.resolve() == builtin_presets_path().resolve()


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise UserError(f"{name!r}: a preset name is letters, digits, '-', '_' or '.'")
    return name


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def _digest(path: Path) -> str | None:
    """What the file holds now (None when absent): a change on disk shows as a new digest."""
    try:
        return _text_digest(read_text_file(path, "presets file"))
    except FileNotFoundError:
        return None


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def file_lock(path: Path):
    """Hold the advisory lock of presets file ``path`` (every gputui writer takes it).
    A sidecar file, because an atomic replace swaps the file's own inode."""
    import fcntl

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path(path), "a")
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes
        yield


def user_file_path() -> Path:
    """The user's presets file, or UserError when its folder cannot be one (e.g.
    XDG_CONFIG_HOME names a file)."""
    path = user_presets_path()
    for folder in (path.parent.parent, path.parent):
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder}: not a directory, so {path} cannot be your presets file; check XDG_CONFIG_HOME")
    return path


def _plain(value: Any) -> Any:
    """A tomlkit item as plain Python (dict, list, str, int, ...)."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def _item(value: Any) -> Any:
    """A value as a tomlkit item that writes on one line (tables inline)."""
    import tomlkit

    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update({k: _item(v) for k, v in value.items()})
        return table
    if isinstance(value, (list, tuple)):
        array = tomlkit.array()
        array.extend(_item(v) for v in value)
        return array
    return value


class PresetFile:
    """One presets file as loaded, with the edits made since; :meth:`save` writes them."""

    def __init__(self, path: Path, text: str, digest: str | None) -> None:
        import tomlkit

        self.path = path
        self.original_text = text
        self.digest = digest
        self._locked = False  # True inside PresetFile.editing, which holds the lock
        try:
            self.document = tomlkit.parse(text)
        except (tomlkit.exceptions.ParseError, RecursionError) as exc:
            parse_text(text, path)  # the same one-line error as loading gives
            raise UserError(f"{path}: cannot edit this file ({type(exc).__name__})") from None
        if not text:
            self.document.add(tomlkit.comment(HEADER_COMMENT))

    @classmethod
    def load(cls, path: Path) -> PresetFile:
        """The file as it is now ({} when absent, e.g. a first user file)."""
        try:
            text = read_text_file(path, "presets file")
        except FileNotFoundError:
            return cls(path, "", None)
        return cls(path, text, _text_digest(text))

    @classmethod
    def user(cls) -> PresetFile:
        return cls.load(user_file_path())

    @classmethod
    @contextlib.contextmanager
    def editing(cls, path: Path):
        """The file loaded under its lock, held until the block ends: a read-modify-write
        that no other gputui writer can interleave with."""
        with file_lock(path):
            store = cls.load(path)
            store._locked = True
            try:
                yield store
            finally:
                store._locked = False

    # -- Reading -----------------------------------------------------------------------
    def _presets_table(self, create: bool = False):
        import tomlkit

        table = self.document.get("presets")
        if table is None and create:
            table = tomlkit.table(is_super_table=True)
            self.document["presets"] = table
        return table

    def names(self) -> list[str]:
        table = self._presets_table()
        return list(table) if table is not None else []

    def table(self, name: str) -> PresetTable | None:
        """One preset's keys as plain values, or None."""
        table = self._presets_table()
        return _plain(table[name]) if table is not None and name in table else None

    def text(self) -> str:
        import tomlkit

        return tomlkit.dumps(self.document)

    def validate(self, text: str | None = None) -> dict[str, Preset]:
        """The presets of the edited text (or ``text``), or UserError naming the key."""
        return parse_text(self.text() if text is None else text, self.path)[0]

    # -- Editing -----------------------------------------------------------------------
    def set_preset(self, name: str, values: PresetTable) -> None:
        """Make preset ``name`` hold exactly ``values``, changing only keys that differ."""
        import tomlkit

        check_name(name)
        presets = self._presets_table(create=True)
        if name not in presets:
            table = tomlkit.table()
            for key, value in values.items():
                table[key] = _item(value)
            presets[name] = table
            return
        _merge(presets[name], values)

    def remove_preset(self, name: str) -> None:
        presets = self._presets_table()
        if presets is None or name not in presets:
            raise UserError(f"{self.path}: no preset named {name!r} in this file")
        del presets[name]

    def rename_preset(self, old: str, new: str, values: PresetTable) -> None:
        if new != old and new in self.names():
            raise UserError(f"{self.path}: a preset named {new!r} exists already")
        self.set_preset(new, values)
        if new != old and old in self.names():
            self.remove_preset(old)

    # -- Writing -----------------------------------------------------------------------
    def changed_on_disk(self) -> bool:
        return _digest(self.path) != self.digest

    def save(self, text: str | None = None, *, force: bool = False, keep: str | None = None) -> dict[str, Preset]:
        """Validate, check for a conflicting change on disk, back up, replace.  Writes
        the edited document, or ``text`` (a whole file a user edited), which must still
        hold preset ``keep`` when given.  Returns the file's presets.  Raises UserError
        (invalid; nothing written), ConflictError (changed on disk; nothing written) or
        UserError for an OS error."""
        if is_builtin(self.path):
            raise UserError(f"{self.path}: built-in presets are read-only; save a copy in {user_presets_path()}")
        text = with_one_final_newline(self.text() if text is None else text)
        presets = self.validate(text)
        if keep is not None and keep not in presets:
            raise UserError(f"{self.path}: the edit removes preset {keep!r}; not saved (to remove it: gputui presets rm {keep})")
        with contextlib.nullcontext() if self._locked else file_lock(self.path):
            if not force and self.changed_on_disk():
                raise ConflictError(f"{self.path}: changed on disk since it was loaded; reload it, or save again to overwrite")
            try:
                write_atomic(self.path, text, backup=backup_path(self.path))
            except OSError as exc:
                raise UserError(f"{self.path}: cannot write ({exc.strerror or exc})") from None
            self.digest = _digest(self.path)
        self.original_text = text
        return presets


def with_one_final_newline(text: str) -> str:
    """``text`` ending in exactly one newline: tomlkit keeps a last line without one (a
    hand-written file), and a removed table leaves the blank lines that stood before it."""
    return text.rstrip("\r\n") + "\n"


def _merge(table: Any, values: PresetTable) -> None:
    """Set ``table`` (a tomlkit table) to ``values`` touching only what differs."""
    for key in [k for k in table if k not in values]:
        del table[key]
    for key, value in values.items():
        if key in table:
            current = table[key]
            if _plain(current) == value:
                continue
            if isinstance(value, dict) and hasattr(current, "items") and not isinstance(current, list):
                _merge(current, value)
                continue
        table[key] = _item(value)


def source_table(preset: Preset) -> PresetTable:
    """The keys of ``preset`` as written in its file (plain values)."""
    from gputui.config import tomllib
    from gputui.presets.command_preset import SOURCE

    if preset.source == SOURCE:  # typed on the dashboard (x): no file holds it yet
        return {k: v for k, v in preset.describe().to_dict().items() if k not in ("name", "source")}
    data = tomllib.loads(preset.source.read_text(encoding="utf-8"))
    return dict(data.get("presets", {}).get(preset.name, {}))
