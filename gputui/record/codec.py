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
import functools
import operator
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gputui.protocol import JsonObject
from gputui.record import events as ev
from gputui.run.outcome import Outcome

T = TypeVar("T")

EXTRA = "extra"  # the field that keeps unknown keys, where a class has one
KEY_ORDER = "key_order"  # the field that keeps the keys' order, where a class has one
NULL: dict[str, bool] = {"null": True}  # field metadata: written as null when None

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
        found = _HINTS[cls] = {f.name: (_widen(hints[f.name]), f.name in required) for f in fields}
    return found


def _widen(hint: Any) -> Any:
    """A closed vocabulary (``Literal["a", "b"]``) as the kind of its words: a reader
    checks that a severity is a string, not which one, so a newer gputui's words still read."""
    if typing.get_origin(hint) is typing.Literal:
        kinds = tuple(dict.fromkeys(type(word) for word in typing.get_args(hint)))
        return functools.reduce(operator.or_, kinds)
    if _is_union(hint):
        return functools.reduce(operator.or_, (_widen(arg) for arg in typing.get_args(hint)))
    return hint


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
# Each hint is made into a checker once (walking type hints costs far more than the
# check itself: a follower of a day-long recording checks millions of fields).

Checker = Callable[[Any, str], None]
_CHECKERS: dict[Any, Checker] = {}


def check(value: Any, hint: Any, where: str) -> None:
    """Raise Wrong unless ``value`` fits ``hint``: a type, a union (``X | None``),
    ``list[X]``, ``dict[str, X]`` or a dataclass (its required fields present, every
    field it has of its type; keys it has no field for let through)."""
    _checker(hint)(value, where)


def _checker(hint: Any) -> Checker:
    found = _CHECKERS.get(hint)
    if found is None:
        _CHECKERS[hint] = _later(hint)  # what a class that holds itself finds while it is made
        found = _CHECKERS[hint] = _compile(hint)
    return found


def _later(hint: Any) -> Checker:
    def check_later(value: Any, where: str) -> None:
        _checker(hint)(value, where)

    return check_later


def _compile(hint: Any) -> Checker:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        return _union_checker(hint, args)
    if dataclasses.is_dataclass(hint):
        return _object_checker(typing.cast(type, hint))
    if origin is list:
        item = _checker(args[0])

        def check_list(value: Any, where: str) -> None:
            if not isinstance(value, list):
                raise Wrong(where, "a list", value)
            for index, one in enumerate(value):
                item(one, f"{where}[{index}]")

        return check_list
    if origin in (dict, Mapping) or hint is dict:
        inner = args[1] if args else Any
        member = _checker(inner)

        def check_dict(value: Any, where: str) -> None:
            if not isinstance(value, dict):
                raise Wrong(where, "an object", value)
            if inner is Any:
                return
            for key, one in value.items():
                member(one, f"{where}.{key}")

        return check_dict
    if hint is Any:
        return lambda value, where: None
    return _scalar_checker(hint)


def _plain(hint: Any) -> bool:
    """A type a JSON value is checked against with isinstance alone."""
    return isinstance(hint, type) and not dataclasses.is_dataclass(hint) and typing.get_origin(hint) is None and hint not in (list, dict)


def _kinds(hint: Any) -> Any:
    return (int, float) if hint is float else hint


def _scalar_checker(hint: Any) -> Checker:
    expected = _describe(hint)
    kinds = _kinds(hint)

    def check_scalar(value: Any, where: str) -> None:
        # JSON true is no number (bool is an int to Python)
        if not isinstance(value, kinds) or (isinstance(value, bool) and hint is not bool):
            raise Wrong(where, expected, value)

    return check_scalar


def _union_checker(hint: Any, args: tuple[Any, ...]) -> Checker:
    nullable = type(None) in args
    others = [arg for arg in args if arg is not type(None)]
    expected = _describe(hint)
    if len(others) == 1 and _plain(others[0]):  # X | None for a number, a string...: one call
        kinds = _kinds(others[0])
        plain = others[0]
        inside = _describe(plain)  # a value of the wrong kind is told what X is, as a null is not wrong

        def check_plain_optional(value: Any, where: str) -> None:
            if value is None:
                if nullable:
                    return
                raise Wrong(where, expected, value)
            if not isinstance(value, kinds) or (isinstance(value, bool) and plain is not bool):
                raise Wrong(where, inside, value)

        return check_plain_optional
    if len(others) == 1:  # X | None: say what inside X is wrong
        inner = _checker(others[0])

        def check_optional(value: Any, where: str) -> None:
            if value is None:
                if nullable:
                    return
                raise Wrong(where, expected, value)
            inner(value, where)

        return check_optional
    members = [_checker(arg) for arg in others]

    def check_union(value: Any, where: str) -> None:
        if value is None and nullable:
            return
        for member in members:
            try:
                member(value, where)
                return
            except Wrong:
                continue
        raise Wrong(where, expected, value)

    return check_union


def _object_checker(cls: type) -> Checker:
    fields = [(key, _checker(inner), required, _describe(inner)) for key, (inner, required) in _hints(cls).items()]

    def check_object(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Wrong(where, "an object", value)
        for key, inner, required, expected in fields:
            if key in value:
                inner(value[key], f"{where}.{key}" if where else key)
            elif required:
                raise Wrong(f"{where}.{key}" if where else key, f"{expected} (it is missing)")

    return check_object


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
    kwargs: JsonObject = {}
    extra: JsonObject = {}
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
        out: JsonObject = {}
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
