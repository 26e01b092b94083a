"""``gputui presets validate|new|edit|rm|path``: changing presets from the command line.

Every change goes through :class:`gputui.presets.store.PresetFile` (validated, atomic,
backed up, conflict-checked).  Errors are UserErrors: one line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from gputui.errors import UserError
from gputui.fmt import printable
from gputui.presets.preset import builtin_presets_path, get_preset, load_diagnosis_file, load_file, load_presets, search_path, user_presets_path
from gputui.presets.store import TEMPLATE, ConflictError, PresetFile, backup_path, check_name, is_builtin, source_table, user_file_path
from gputui.safe_write import write_atomic_with


def add_commands(presets_sub) -> None:
    validate = presets_sub.add_parser("validate", help="check one presets file, or every file gputui reads")
    validate.add_argument("file", nargs="?", type=Path)
    new = presets_sub.add_parser("new", help="add a preset to your presets file (a copy of another, or a template)")
    new.add_argument("name")
    new.add_argument("--from", dest="from_", metavar="OTHER", help="copy this preset")
    edit = presets_sub.add_parser("edit", help="edit a preset's file in $EDITOR; only a valid result is saved")
    edit.add_argument("name")
    rm = presets_sub.add_parser("rm", help="remove a preset from your presets file")
    rm.add_argument("name")
    presets_sub.add_parser("path", help="which file each preset comes from, and the files gputui reads")


def run(args: argparse.Namespace) -> int:
    return {"validate": cmd_validate, "new": cmd_new, "edit": cmd_edit, "rm": cmd_rm, "path": cmd_path}[args.presets_command](args)


def candidate_files(extra: Path | None, cwd: Path | None = None) -> list[tuple[Path, str]]:
    """Every file gputui looks for, in merge order, with what it is."""
    files = [
        (builtin_presets_path(), "built-in, read-only"),
        (user_presets_path(), "your presets file"),
        ((cwd or Path.cwd()) / "presets.toml", "this directory"),
    ]
    if extra is not None:
        files.append((extra, "--presets"))
    return files


def cmd_path(args: argparse.Namespace) -> int:
    print("files, in merge order (later files win):")
    for index, (path, what) in enumerate(candidate_files(args.presets), 1):
        print(f"  {index}. {printable(path)}  ({what}; {'exists' if path.is_file() else 'absent'})")
    presets = load_presets(extra=args.presets)
    width = max((len(printable(n)) for n in presets), default=0)
    print("presets:")
    for name in sorted(presets):
        print(f"  {printable(name):<{width}}  {printable(presets[name].source)}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    files = [args.file] if args.file is not None else search_path(args.presets)
    failed = False
    for path in files:
        try:
            count = len(load_file(path))
            load_diagnosis_file(path)
        except UserError as exc:
            print(f"gputui: error: {printable(exc)}", file=sys.stderr)
            failed = True
            continue
        print(f"ok  {printable(path)} ({count} preset{'s' if count != 1 else ''})")
    return 2 if failed else 0


def cmd_new(args: argparse.Namespace) -> int:
    name = check_name(args.name)
    presets = load_presets(extra=args.presets)
    if name in presets:
        raise UserError(f"a preset named {name!r} exists already (in {presets[name].source}): use `gputui presets edit {name}`")
    values = source_table(get_preset(presets, args.from_)) if args.from_ else dict(TEMPLATE)
    with PresetFile.editing(user_file_path()) as store:  # locked: parallel `new`s all land
        if name in store.names():  # added by another gputui since load_presets read the file
            raise UserError(f"a preset named {name!r} exists already (in {store.path}): use `gputui presets edit {name}`")
        store.set_preset(name, values)
        store.save()
    print(f"added preset {name!r} to {store.path}" + (f" (a copy of {args.from_!r})" if args.from_ else ""))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with PresetFile.editing(user_file_path()) as store:
        if args.name not in store.names():
            presets = load_presets(extra=args.presets)
            preset = get_preset(presets, args.name)
            if is_builtin(preset.source):
                raise UserError(f"{args.name!r} is a built-in preset: built-ins are read-only and cannot be removed")
            raise UserError(f"{args.name!r} is not in your presets file {store.path}: it comes from {preset.source}; edit that file")
        store.remove_preset(args.name)
        store.save()
    print(f"removed preset {args.name!r} from {store.path} (previous version: {backup_path(store.path)})")
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    presets = load_presets(extra=args.presets)
    preset = get_preset(presets, args.name)
    if is_builtin(preset.source):
        store = PresetFile.user()
        if args.name not in store.names():
            store.set_preset(args.name, source_table(preset))
        print(f"{args.name!r} is built-in (read-only): editing a copy in {store.path}, which then wins over the built-in", file=sys.stderr)
    else:
        store = PresetFile.load(preset.source)
    return edit_in_editor(store, args.name)


def keep_edit(store: PresetFile, data: bytes) -> Path:
    """Put an edit that cannot be saved next to the file, so it is not lost."""
    keep = store.path.with_name(store.path.name + ".edited")
    try:
        write_atomic_with(keep, lambda handle: handle.write(data), binary=True, like=store.path)  # may hold its secrets
    except OSError as exc:
        raise UserError(f"{keep}: cannot keep your edit there ({exc.strerror or exc}); {store.path} left as it was") from None
    return keep


def edit_in_editor(store: PresetFile, name: str) -> int:
    """Open $EDITOR on a temporary copy of the file; save only a valid result that
    still holds preset ``name``."""
    editor = shlex.split(os.environ.get("EDITOR") or "vi")
    text = store.text()
    fd, temp_name = tempfile.mkstemp(prefix="gputui-presets-", suffix=".toml")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        while True:
            result = subprocess.run([*editor, str(temp)])
            if result.returncode != 0:
                raise UserError(f"the editor ({shlex.join(editor)}) exited with code {result.returncode}; {store.path} left as it was")
            try:
                data = temp.read_bytes()
            except OSError as exc:  # e.g. an editor that saves by rename and failed half-way
                raise UserError(f"{temp}: the file being edited is gone ({exc.strerror}); {store.path} left as it was") from None
            try:
                edited = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(
                    f"{store.path}: your edit is not UTF-8 text (byte {exc.start}; save it as UTF-8); not saved (your version is in {keep_edit(store, data)})"
                ) from None
            if edited == text:
                print(f"no changes; {store.path} left as it was")
                return 0
            try:
                store.save(edited, keep=name)
            except ConflictError as exc:
                keep = keep_edit(store, data)
                raise UserError(f"{exc.args[0].split('; ')[0]}; not saved (your version is in {keep})") from None
            except UserError as exc:
                print(f"gputui: error: {printable(exc)}", file=sys.stderr)
                if not _ask_reopen():
                    print(f"gputui: {store.path} left as it was", file=sys.stderr)
                    return 2
                continue
            print(f"saved {store.path} (previous version: {backup_path(store.path)})")
            return 0
    finally:
        temp.unlink(missing_ok=True)


def _ask_reopen() -> bool:
    if not sys.stdin.isatty():
        return False
    while True:
        try:
            answer = input("(r)eopen the editor or (a)bandon the changes? [r/a] ").strip().lower()
        except EOFError:
            return False
        if answer in ("r", "reopen", ""):
            return True
        if answer in ("a", "abandon"):
            return False
