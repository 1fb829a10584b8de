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
  ``{"max_steps": "'constraints: {max_steps: ...}'"}``), else the closest of the Struct's keys,
  else what :attr:`elsewhere` (a ``ClassVar`` text, ``{key}`` standing for the key) says of any
  other key: an assertion's own settings go under its ``config:``.

And the hints of a value of the wrong kind (:func:`atp.core.mistakes.collect` finds them): an
enumerated value not allowed gets the values that are (:func:`describe_value`, ``'three'`` for
``runs_per_test``: a whole number from 1 to 10000, or 'auto') and the closest of them; a list
written where a mapping goes, or the other way round, gets an example of the right shape
(:func:`shape_hint`, from :attr:`examples`, a ``ClassVar`` mapping a field to an example).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from atp.core.text import printable

PathPart = str | int

__all__ = [
    "closest",
    "declared",
    "describe",
    "describe_value",
    "is_struct",
    "meant_field",
    "mend",
    "restore_spellings",
    "shape_hint",
    "type_options",
    "unknown_key_hint",
]

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


def is_struct(option: Any) -> bool:
    """Whether ``option`` (one of :func:`type_options`) is a msgspec Struct class."""
    return isinstance(option, type) and issubclass(option, msgspec.Struct)


def _kind(option: Any) -> str:
    """``map``, ``seq``, ``none`` or ``other``: what a value of this (split) type is."""
    if option is None or option is type(None) or option is Any:
        return "none"  # Any takes null as it is
    origin = typing.get_origin(option) or option
    if is_struct(option) or origin in (dict, Mapping):
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


def declared(cls: type[msgspec.Struct], name: str, default: Any) -> Any:
    """What a Struct declares as the ``ClassVar`` ``name`` (``aliases``, ``spellings``,
    ``elsewhere``, ``examples``), or ``default`` (also when ``name`` is one of its fields)."""
    if name in cls.__struct_fields__:
        return default
    found = getattr(cls, name, default)
    return (
        found if isinstance(found, type(default)) or (default is None and isinstance(found, str)) else default
    )


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
        structs = [o for o in options if is_struct(o)]
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
    aliases: Mapping[str, str] = declared(cls, "aliases", {})
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


def _abbreviates(short: str, name: str) -> bool:
    """Whether ``short`` is ``name`` with letters left out (``cmd``: ``command``)."""
    if len(short) < 3 or short[0] != name[0] or len(short) >= len(name):
        return False
    rest = iter(name)
    return all(char in rest for char in short)


def closest(name: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` that ``name`` was most likely meant to be: the one it abbreviates
    (the closest of those, if several), else the closest by :mod:`difflib` (``None``: none is
    close)."""
    shortened = [candidate for candidate in names if _abbreviates(name, candidate)]
    if shortened:
        return difflib.get_close_matches(name, shortened, n=1, cutoff=0)[0]
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=CUTOFF)
    return close[0] if close else None


def meant_field(key: str, cls: type[msgspec.Struct]) -> str | None:
    """The field of ``cls`` that an unknown ``key`` is a misspelling of, if any."""
    return closest(key, list(_fields(cls)))


def unknown_key_hint(key: str, type_: Any) -> str:
    """What to say after ``unknown field 'KEY'`` of a value of ``type_`` (``""``: nothing)."""
    for option in type_options(type_):
        if not is_struct(option):
            continue
        aliases: Mapping[str, str] = declared(option, "aliases", {})
        if key in aliases:
            return f"; it is another spelling of {aliases[key]!r}, which is given too: keep one of them"
        spellings: Mapping[str, str] = declared(option, "spellings", {})
        if key in spellings:
            return f"; did you mean {spellings[key]}?"
        close = closest(key, [*_fields(option), *aliases])
        if close:
            return f"; did you mean {close!r}?"
        elsewhere: str | None = declared(option, "elsewhere", None)
        if elsewhere:
            return "; " + elsewhere.format(key=printable(key if len(key) <= 40 else key[:39] + "\u2026"))
    return ""


# --- values of the wrong kind -------------------------------------------------------------------


def _options_with_meta(type_: Any, metas: tuple[msgspec.Meta, ...] = ()) -> list[tuple[Any, tuple[Any, ...]]]:
    """``type_``'s union split, each option with the ``msgspec.Meta`` constraints on it."""
    origin = typing.get_origin(type_)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(type_)
        return _options_with_meta(inner, (*metas, *(m for m in extra if isinstance(m, msgspec.Meta))))
    if origin is typing.Union or origin is types.UnionType:
        return [found for arg in typing.get_args(type_) for found in _options_with_meta(arg, metas)]
    return [(type_, metas)]


def _figure(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds(metas: tuple[Any, ...]) -> str:
    """A number's bounds in words: `` from 1 to 10000``, `` above 0``."""
    ge = next((m.ge for m in metas if m.ge is not None), None)
    le = next((m.le for m in metas if m.le is not None), None)
    if ge is not None and le is not None:
        return f" from {_figure(ge)} to {_figure(le)}"
    words = [
        f"{word} {_figure(bound)}"
        for word, bound in (
            ("at least", ge),
            ("above", next((m.gt for m in metas if m.gt is not None), None)),
            ("at most", le),
            ("below", next((m.lt for m in metas if m.lt is not None), None)),
        )
        if bound is not None
    ]
    return " " + " and ".join(words) if words else ""


def _word(option: Any, metas: tuple[Any, ...]) -> str:
    """What a value of one (split) type is, in words."""
    if option is bool:
        return "true or false"
    if option is int:
        return "a whole number" + _bounds(metas)
    if option is float:
        return "a number" + _bounds(metas)
    if option is str:
        least = next((m.min_length for m in metas if m.min_length is not None), 0)
        most = next((m.max_length for m in metas if m.max_length is not None), None)
        text = "non-empty text" if least == 1 else f"text of at least {least} characters" if least else "text"
        pattern = next((m.pattern for m in metas if m.pattern is not None), None)
        text += f" of at most {most} characters" if most is not None else ""
        return text + (f" matching {pattern!r}" if pattern is not None else "")
    kind = _kind(option)
    if kind == "map":
        return "a mapping"
    if kind == "seq":
        return "a list"
    return str(getattr(option, "__name__", option))


def describe(type_: Any) -> str:
    """What ``type_`` takes, in words: ``a whole number from 1 to 10000 or 'auto'``."""
    words: list[str] = []
    for option, metas in _options_with_meta(type_):
        if option is None or option is type(None):
            continue
        if typing.get_origin(option) is typing.Literal:
            words.extend(
                repr(value) if isinstance(value, str) else str(value) for value in typing.get_args(option)
            )
        else:
            words.append(_word(option, metas))
    words = list(dict.fromkeys(words))
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:39] + "\u2026")
    if isinstance(value, (int, float)):
        return _figure(value)[:40]
    return (
        "a mapping"
        if isinstance(value, dict)
        else "a list"
        if isinstance(value, list)
        else type(value).__name__
    )


def describe_value(value: Any, type_: Any) -> str | None:
    """An enumerated value that ``type_`` does not allow, said with what it takes (the values
    allowed, the closest of them, and what else it takes); ``None`` when ``type_`` is not
    enumerated (msgspec's words say it then)."""
    options = [option for option, _ in _options_with_meta(type_)]
    texts = [
        literal
        for option in options
        if typing.get_origin(option) is typing.Literal
        for literal in typing.get_args(option)
        if isinstance(literal, str)
    ]
    if not texts:
        return None
    close = closest(value, texts) if isinstance(value, str) else None
    meant = f"; did you mean {close!r}?" if close else ""
    return f"{_shown(value)} is not allowed here: it takes {describe(type_)}{meant}"


_SHAPE = re.compile(r"\Aexpected (array|object)(?: \| null)?, got (object|array)\Z")
_SHAPE_WORDS = {
    "array": "a list (items written '- ...')",
    "object": "a mapping (keys written 'key: value')",
}


def shape_hint(text: str, example: str | None) -> str:
    """msgspec's words for a list written where a mapping goes (or the other way round), said
    plainly and with ``example`` of the right shape, when there is one."""
    match = _SHAPE.match(text)
    if match is None:
        return text
    got = "a list" if match.group(2) == "array" else "a mapping"
    plain = f"expected {_SHAPE_WORDS[match.group(1)]}, got {got}"
    return f"{plain}; write it like: {example}" if example else plain
