"""How suite and config files are read leniently where their meaning is unambiguous, and what an
unknown key's error suggests instead.

Three things, declared by the Structs a file is read into and applied by
:meth:`YamlDocument.convert <atp.core.yamlfile.YamlDocument.convert>` only when the file
does not convert as it is (a file that converts costs nothing more):

- an empty value (``agents:`` holding only a comment is YAML's ``null``) where the Struct wants
  a mapping, or a list, and not ``null``: it is read as an empty one. A value whose type also
  takes something else (``str | list[str]``) is left as it is;
- other spellings of a key (:attr:`aliases`, a ``ClassVar`` mapping the spelling to the field's
  own key): ``runs: 5`` is ``runs_per_test: 5`` on a test. Given beside the key itself, the
  spelling stays an unknown key, and its error says to keep one;
- an unknown key's hint: the key it was meant to be from :attr:`spellings` (a ``ClassVar``
  mapping a key written in the wrong place to where it goes, like
  ``{"max_steps": "'constraints: {max_steps: ...}'"}``), else the closest of the Struct's keys.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

PathPart = str | int

__all__ = ["mend", "restore_spellings", "type_options", "unknown_key_hint"]

CUTOFF = 0.6
"""How close a key must be to one of the Struct's to be suggested (difflib's ratio)."""


def type_options(type_: Any) -> list[Any]:
    """``type_`` without ``Annotated``, its unions split."""
    origin = typing.get_origin(type_)
    if origin is typing.Annotated:
        return type_options(typing.get_args(type_)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [option for arg in typing.get_args(type_) for option in type_options(arg)]
    return [type_]


def _is_struct(option: Any) -> bool:
    return isinstance(option, type) and issubclass(option, msgspec.Struct)


def _kind(option: Any) -> str:
    """``map``, ``seq``, ``none`` or ``other``: what a value of this (split) type is."""
    if option is None or option is type(None) or option is Any:
        return "none"  # Any takes null as it is
    origin = typing.get_origin(option) or option
    if _is_struct(option) or origin in (dict, Mapping):
        return "map"
    if origin in (list, tuple, set, frozenset, Sequence):
        return "seq"
    return "other"


def _empty(options: list[Any]) -> Any:
    """The empty value a ``null`` of these types stands for, or ``None`` when it is ambiguous."""
    kinds = {_kind(option) for option in options}
    if kinds == {"map"}:
        return {}
    if kinds == {"seq"}:
        return []
    return None


def _fields(cls: type[msgspec.Struct]) -> dict[str, Any]:
    return {field.encode_name: field.type for field in msgspec.structs.fields(cls)}


def mend(
    value: Any, type_: Any, renames: dict[tuple[PathPart, ...], str], at: tuple[PathPart, ...] = ()
) -> Any:
    """``value`` as :mod:`this module <atp.core.spelling>` reads it for ``type_``: empty values
    made empty mappings or lists, accepted spellings renamed (each recorded in ``renames``, by
    its new path, to be shown as written). The same object when nothing changed; what changed
    is copied, never changed in place."""
    options = type_options(type_)
    if value is None:
        empty = _empty(options)
        return value if empty is None else empty
    if isinstance(value, dict):
        structs = [o for o in options if _is_struct(o)]
        maps = [o for o in options if (typing.get_origin(o) or o) in (dict, Mapping)]
        if len(structs) + len(maps) != 1:
            return value
        if structs:
            return _mend_struct(value, structs[0], renames, at)
        args = typing.get_args(maps[0])
        item_type = args[1] if len(args) == 2 else Any
        return _mend_items(value, {key: item_type for key in value}, renames, at)
    if isinstance(value, list):
        for option in options:
            if (typing.get_origin(option) or option) in (list, set, frozenset, Sequence):
                args = typing.get_args(option)
                item_type = args[0] if args else Any
                changed = [mend(item, item_type, renames, (*at, i)) for i, item in enumerate(value)]
                if any(new is not old for new, old in zip(changed, value, strict=True)):
                    return changed
                return value
    return value


def _mend_struct(
    value: dict[Any, Any],
    cls: type[msgspec.Struct],
    renames: dict[tuple[PathPart, ...], str],
    at: tuple[PathPart, ...],
) -> dict[Any, Any]:
    fields = _fields(cls)
    aliases: Mapping[str, str] = getattr(cls, "aliases", {})
    names: dict[Any, Any] = {}
    types_: dict[Any, Any] = {}
    for key in value:
        name = key
        if isinstance(key, str) and key not in fields and key in aliases and aliases[key] not in value:
            name = aliases[key]
            where: tuple[PathPart, ...] = (*at, name)
            renames[where] = key
        names[key] = name
        types_[key] = fields.get(name, Any)
    mended = _mend_items(value, types_, renames, at, names)
    if mended is value and all(names[key] == key for key in value):
        return value
    return {names[key]: item for key, item in mended.items()}


def _mend_items(
    value: dict[Any, Any],
    types_: Mapping[Any, Any],
    renames: dict[tuple[PathPart, ...], str],
    at: tuple[PathPart, ...],
    names: Mapping[Any, Any] | None = None,
) -> dict[Any, Any]:
    """The mapping with each value mended for its type (the same mapping when none changed)."""
    changed: dict[Any, Any] | None = None
    for key, item in value.items():
        part = (names or {}).get(key, key)
        new = mend(item, types_[key], renames, (*at, part if isinstance(part, (str, int)) else str(part)))
        if new is not item:
            changed = changed if changed is not None else dict(value)
            changed[key] = new
    return changed if changed is not None else value


def restore_spellings(
    parts: Sequence[PathPart], renames: Mapping[tuple[PathPart, ...], str]
) -> list[PathPart]:
    """A located path in mended data, with each renamed key as the file writes it."""
    shown = list(parts)
    for length in range(1, len(shown) + 1):
        written = renames.get(tuple(parts[:length]))
        if written is not None:
            shown[length - 1] = written
    return shown


def unknown_key_hint(key: str, type_: Any) -> str:
    """What to say after ``unknown field 'KEY'`` of a value of ``type_`` (``""``: nothing)."""
    for option in type_options(type_):
        if not _is_struct(option):
            continue
        aliases: Mapping[str, str] = getattr(option, "aliases", {})
        if key in aliases:
            return f"; it is another spelling of {aliases[key]!r}, which is given too: keep one of them"
        spellings: Mapping[str, str] = getattr(option, "spellings", {})
        if key in spellings:
            return f"; did you mean {spellings[key]}?"
        close = difflib.get_close_matches(key, [*_fields(option), *aliases], n=1, cutoff=CUTOFF)
        if close:
            return f"; did you mean {close[0]!r}?"
    return ""
