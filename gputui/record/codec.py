"""One walk over a dataclass's type hints, three uses: hold a JSON value to it (the
reader's check), build the typed object from it, and write the object back.

So a recording line's shape is declared once, as the dataclass its reader returns
(gputui.record.schema, gputui.model, the event payloads).  A field named ``extra``
holds the keys a newer (or older) writer put in that the class has no field for, and
one named ``key_order`` the order its keys came in (a workload's line is written back
as the workload wrote it); a field whose metadata says ``null`` is written as null when
None (the writer always wrote that key), every other None is left out.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from gputui.record import events as ev
from gputui.run.outcome import Outcome

T = TypeVar("T")

EXTRA = "extra"  # the field that keeps unknown keys, where a class has one
KEY_ORDER = "key_order"  # the field that keeps the keys' order, where a class has one
NULL: dict[str, Any] = {"null": True}  # field metadata: written as null when None

_NAMES = {int: "a whole number", float: "a number", str: "a string", bool: "true or false", list: "a list", dict: "an object", type(None): "null"}
_ABSENT = object()  # no value to name: a key that is missing


class Wrong(Exception):
    """A value of the wrong shape: ``where`` (a dotted key), what was expected and what came."""

    def __init__(self, where: str, expected: str, got: Any = _ABSENT) -> None:
        super().__init__(f"{where}: expected {expected}" + ("" if got is _ABSENT else f", got {_kind_of(got)}"))


def _kind_of(value: Any) -> str:
    """What a JSON value is, in the words of an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    return _NAMES.get(type(value), "a value")


_HINTS: dict[type, dict[str, tuple[Any, bool]]] = {}


def _hints(cls: type) -> dict[str, tuple[Any, bool]]:
    """field name -> (its type hint, whether it is required), the ``extra`` field left
    out; looked up once per class."""
    found = _HINTS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.name not in (EXTRA, KEY_ORDER)]
        required = {f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        found = _HINTS[cls] = {f.name: (hints[f.name], f.name in required) for f in fields}
    return found


def _has_field(cls: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _describe(hint: Any) -> str:
    if _is_union(hint):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if dataclasses.is_dataclass(hint):
        return "an object"
    return _NAMES.get(typing.get_origin(hint) or hint, "a value")


# --- Checking -------------------------------------------------------------------------


def check(value: Any, hint: Any, where: str) -> None:
    """Raise Wrong unless ``value`` fits ``hint``: a type, a union (``X | None``),
    ``list[X]``, ``dict[str, X]`` or a dataclass (its required fields present, every
    field it has of its type; keys it has no field for let through)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        if value is None and type(None) in args:
            return
        others = [arg for arg in args if arg is not type(None)]
        if len(others) == 1:  # X | None: say what inside X is wrong
            if value is None:
                raise Wrong(where, _describe(hint), value)
            return check(value, others[0], where)
        if not any(_fits(value, arg, where) for arg in others):
            raise Wrong(where, _describe(hint), value)
        return
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise Wrong(where, "an object", value)
        for key, (inner, required) in _hints(typing.cast(type, hint)).items():
            if key in value:
                check(value[key], inner, f"{where}.{key}" if where else key)
            elif required:
                raise Wrong(f"{where}.{key}" if where else key, f"{_describe(inner)} (it is missing)")
        return
    if origin is list:
        if not isinstance(value, list):
            raise Wrong(where, "a list", value)
        for index, item in enumerate(value):
            check(item, args[0], f"{where}[{index}]")
        return
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, dict):
            raise Wrong(where, "an object", value)
        for key, item in value.items():
            check(item, args[1] if args else Any, f"{where}.{key}")
        return
    if hint is Any:
        return
    if isinstance(value, bool) and hint is not bool:  # JSON true is no number
        raise Wrong(where, _describe(hint), value)
    if hint is float and isinstance(value, (int, float)):
        return
    if not isinstance(value, hint):
        raise Wrong(where, _describe(hint), value)


def _fits(value: Any, hint: Any, where: str) -> bool:
    try:
        check(value, hint, where)
    except Wrong:
        return False
    return True


# --- Building and writing -------------------------------------------------------------


def from_record(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls`` from a checked JSON object: nested dataclasses built too, keys it has no
    field for kept in its ``extra`` (dropped where it has none)."""
    fields = _hints(cls)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in fields:
            kwargs[key] = _build(value, fields[key][0])
        else:
            extra[key] = value
    if _has_field(cls, EXTRA):
        kwargs[EXTRA] = extra
    if _has_field(cls, KEY_ORDER):
        kwargs[KEY_ORDER] = tuple(data)
    return cls(**kwargs)


def _build(value: Any, hint: Any) -> Any:
    if value is None:
        return None
    if _is_union(hint):  # the one member the value fits (``list[X] | X``: by its JSON kind)
        others = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        fitting = [arg for arg in others if _fits(value, arg, "")]
        return _build(value, (fitting or others)[0])
    if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return from_record(typing.cast(type, hint), value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and isinstance(value, list):
        return [_build(item, args[0]) for item in value]
    if origin in (dict, Mapping) and args and isinstance(value, Mapping):
        return {key: _build(item, args[1]) for key, item in value.items()}
    return value


def to_record(obj: Any) -> Any:
    """A dataclass (nested, in lists) as its JSON object: fields in declared order (or
    the order they were read in), None left out unless the field is written as null,
    then its ``extra`` keys.  An outcome or a finding is written as its event is
    (gputui.record.events.payload_fields)."""
    if isinstance(obj, (Outcome, ev.Finding)):
        return ev.payload_fields(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        order: tuple[str, ...] = ()
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name == EXTRA:
                out.update(value)
            elif f.name == KEY_ORDER:
                order = value
            elif value is not None or f.metadata.get("null"):
                out[f.name] = to_record(value)
        if order:
            out = {**{key: out[key] for key in order if key in out}, **out}
        return out
    if isinstance(obj, (list, tuple)):
        return [to_record(item) for item in obj]
    if isinstance(obj, Mapping):
        return {key: to_record(value) for key, value in obj.items()}
    return obj
