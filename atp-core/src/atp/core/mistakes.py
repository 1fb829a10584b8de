"""Every mistake of a suite or config file at once, each located and with a hint.

msgspec stops at the first error of a conversion. When a file does not convert,
:meth:`YamlDocument.convert <atp.core.yamlfile.YamlDocument.convert>` has :func:`collect` walk
the data beside the type it is read into, and report what msgspec would refuse, everywhere: every
unknown key (with :func:`atp.core.spelling.unknown_key_hint`), every missing key of a mapping in
one message, every value of the wrong type or out of bounds (an enumerated one with the values
allowed and the closest of them), up to :data:`MAX_MISTAKES`. The walk goes down only where the
converted part fails, so its answer is what msgspec refuses, never more; what it cannot tell
apart field by field (a check of a Struct's own) is msgspec's first error, located by
:func:`locate`.

:class:`Mistakes` gathers the located errors of the several steps of reading a suite (its
structure, then each assertion's ``config``) into one :class:`~atp.core.errors.SuiteErrors`.
"""

from __future__ import annotations

import contextlib
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from atp.core.errors import SuiteError, SuiteErrors
from atp.core.spelling import (
    PathPart,
    declared,
    describe_value,
    is_struct,
    meant_field,
    shape_hint,
    type_options,
    unknown_key_hint,
)

__all__ = ["MAX_MISTAKES", "Mistakes", "collect", "key_part", "locate", "message_path", "short", "type_at"]

MAX_MISTAKES = 20
"""The most mistakes one error reports (a file with more: fix these, and run again)."""
LONG_PART = 80
"""The longest key or value a message quotes whole."""

Found = tuple[list[PathPart], str]
"""A mistake: where (the path below the data walked) and what."""


def short(text: str) -> str:
    """``text``, cut to :data:`LONG_PART` characters."""
    return text if len(text) <= LONG_PART else text[: LONG_PART - 1] + "…"


class Mistakes:
    """The located errors of one file (or of a suite and its steps), up to a bound: gathered,
    then raised together."""

    def __init__(self, limit: int = MAX_MISTAKES) -> None:
        self.limit = limit
        self.errors: list[SuiteError] = []
        self.more = False
        """Some were left out: the bound was reached."""

    def __len__(self) -> int:
        return len(self.errors)

    @property
    def full(self) -> bool:
        return len(self.errors) >= self.limit

    def add(self, error: SuiteError) -> None:
        """Keep ``error`` (each of the errors of a :class:`SuiteErrors`)."""
        self.more = self.more or (isinstance(error, SuiteErrors) and error.more)
        for each in error.each():
            if self.full:
                self.more = True
                return
            self.errors.append(each)

    @contextlib.contextmanager
    def collecting(self) -> Iterator[None]:
        """Keep a :class:`SuiteError` raised in the ``with`` block, and go on after it."""
        try:
            yield
        except SuiteError as exc:
            self.add(exc)

    def error(self) -> SuiteError:
        """What was gathered, as one error (it must not be empty), in the order of the lines."""
        return SuiteErrors.of(sorted(self.errors, key=lambda e: e.line or 0), more=self.more)

    def raise_any(self) -> None:
        if self.errors:
            raise self.error()


# --- the walk --------------------------------------------------------------------------------


def collect(data: Any, type_: Any, limit: int = MAX_MISTAKES) -> list[Found]:
    """Where and what each mistake converting ``data`` to ``type_`` is, up to ``limit`` (none
    when it converts)."""
    found: list[Found] = []
    _walk(data, type_, [], found, limit, None)
    return found[:limit]


def _walk(
    value: Any, type_: Any, at: list[PathPart], found: list[Found], limit: int, example: str | None
) -> None:
    if len(found) >= limit:
        return
    try:
        msgspec.convert(value, type_)
        return
    except msgspec.ValidationError as exc:
        error = str(exc)
    options = type_options(type_)
    before = len(found)
    if isinstance(value, dict):
        structs = [o for o in options if is_struct(o)]
        maps = [o for o in options if (typing.get_origin(o) or o) in (dict, Mapping)]
        if len(structs) == 1 and not maps and _walkable(structs[0], value):
            _walk_struct(value, structs[0], at, found, limit, error)
            return
        if len(maps) == 1 and not structs:
            _walk_entries(value, maps[0], at, found, limit)
    elif isinstance(value, list):
        sequences = [o for o in options if (typing.get_origin(o) or o) in (list, set, frozenset, Sequence)]
        if len(sequences) == 1:
            args = typing.get_args(sequences[0])
            for index, item in enumerate(value):
                _walk(item, args[0] if args else Any, [*at, index], found, limit, None)
    if len(found) > before:
        return
    parts, text = locate(value, type_, error)
    if not parts:
        text = describe_value(value, type_) or shape_hint(text, example)
    found.append(([*at, *parts], text))


def _walkable(cls: type[msgspec.Struct], value: dict[Any, Any]) -> bool:
    """Whether a mapping read as ``cls`` can be checked key by key (string keys, a Struct read
    from a mapping)."""
    return not cls.__struct_config__.array_like and all(isinstance(key, str) for key in value)


def _walk_entries(
    value: dict[Any, Any], type_: Any, at: list[PathPart], found: list[Found], limit: int
) -> None:
    """The mistakes of each entry's value (when every key is valid: a bad key is msgspec's
    error, located as it is)."""
    args = typing.get_args(type_)
    key_type, value_type = args if len(args) == 2 else (Any, Any)
    try:
        msgspec.convert(list(value), list[key_type])  # type: ignore[valid-type]
    except msgspec.ValidationError:
        return
    for key, item in value.items():
        _walk(item, value_type, [*at, key_part(key)], found, limit, None)


def _walk_struct(
    value: dict[str, Any],
    cls: type[msgspec.Struct],
    at: list[PathPart],
    found: list[Found],
    limit: int,
    error: str,
) -> None:
    """A mapping read as ``cls``: each unknown key, each field's mistakes, the missing keys."""
    before = len(found)
    config = cls.__struct_config__
    fields = {field.encode_name: field for field in msgspec.structs.fields(cls)}
    examples: Mapping[str, str] = declared(cls, "examples", {})
    meant: set[str] = set()
    for key, item in value.items():
        if len(found) >= limit:
            return
        field = fields.get(key)
        if field is not None:
            _walk(item, field.type, [*at, key], found, limit, examples.get(key))
        elif config.forbid_unknown_fields and key != config.tag_field:
            meant.add(meant_field(key, cls) or "")
            found.append(([*at, key], f"unknown field {short(key)!r}{unknown_key_hint(key, cls)}"))
    missing = [
        name for name, field in fields.items() if field.required and name not in value and name not in meant
    ]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        plural = "s" if len(missing) > 1 else ""
        found.append((list(at), f"missing required field{plural} {names}"))
    if len(found) == before:  # a check of the Struct's own: msgspec's words
        parts, text = locate(value, cls, error)
        found.append(([*at, *parts], text))


# --- locating msgspec's validation errors ----------------------------------------------------

_AT = re.compile(r" - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`$")
_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(\.\.\.)\]")
_UNKNOWN_FIELD = re.compile(r"\AObject contains unknown field `(?P<field>.*)`\Z", re.DOTALL)
_ENTRY = object()  # a path part: "some entry of this mapping" (msgspec's `[...]`)


def locate(data: Any, type_: Any, message: str) -> tuple[list[PathPart], str]:
    """The path (below ``data``) and the wording of msgspec's error ``message`` about
    converting ``data`` to ``type_``.

    msgspec names an entry of a mapping ``[...]`` and a key ``key in $.path``, without saying
    which one. Those are found by converting each entry of the mapping on its own, to the
    mapping's key and value types; when that is not possible, the error points at the
    mapping itself.
    """
    text, tokens, about_key = message, [], False
    match = _AT.search(message)
    if match:
        text = message[: match.start()]
        about_key = match.group("key") is not None
        for name, index, entry in _PART.findall(match.group("path")):
            tokens.append(_ENTRY if entry else int(index) if index else name)
    last: list[PathPart] = []
    unknown = _UNKNOWN_FIELD.match(text)
    if unknown:
        last.append(unknown.group("field"))
        text = f"unknown field {short(unknown.group('field'))!r}"
    else:
        text = _humane(text)
    parts: list[PathPart] = []
    value: Any = data
    for token in tokens:
        if token is _ENTRY:
            found = _bad_entry(value, type_)
            if found is None:
                return parts, text
            key, value_type, value_message = found
            parts.append(key_part(key))
            if value_message is None:
                return parts, f"invalid key {short(_key_text(key))}: {text}"
            more, text = locate(value[key], value_type, value_message)
            return parts + more, text
        assert isinstance(token, (str, int))
        parts.append(token)
        value, type_ = _step(value, token), _step_type(type_, token)
    if about_key:
        found = _bad_entry(value, type_, keys_only=True)
        if found is not None:
            parts.append(key_part(found[0]))
            return parts, f"invalid key {short(_key_text(found[0]))}: {text}"
    if unknown:
        text += unknown_key_hint(unknown.group("field"), type_)
    return parts + last, text


def message_path(message: str) -> tuple[str, list[PathPart]] | None:
    """msgspec's error ``message`` split into its words and the path it names (``None`` when
    the path names an entry or a key without saying which)."""
    match = _AT.search(message)
    if match is None:
        return message, []
    if match.group("key") is not None:
        return None
    parts: list[PathPart] = []
    for name, index, entry in _PART.findall(match.group("path")):
        if entry:
            return None
        parts.append(int(index) if index else name)
    return message[: match.start()], parts


def type_at(type_: Any, parts: Sequence[PathPart]) -> Any:
    """The type of the value at ``parts`` in a value of ``type_`` (``None``: not known)."""
    for part in parts:
        type_ = _step_type(type_, part)
        if type_ is None:
            return None
    return type_


_MISSING = object()


def _step(value: Any, token: PathPart) -> Any:
    if isinstance(token, str) and isinstance(value, dict):
        return value.get(token, _MISSING)
    if isinstance(token, int) and isinstance(value, (list, tuple)) and 0 <= token < len(value):
        return value[token]
    return _MISSING


def _step_type(type_: Any, token: PathPart) -> Any:
    """The type of the field or item ``token`` of a value of ``type_`` (``None``: unknown)."""
    for option in type_options(type_):
        origin = typing.get_origin(option) or option
        args = typing.get_args(option)
        if isinstance(token, str):
            if isinstance(option, type) and issubclass(option, msgspec.Struct):
                for field in msgspec.structs.fields(option):
                    if field.encode_name == token:
                        return field.type
        elif origin in (list, set, frozenset) or origin is Sequence:
            return args[0] if args else Any
        elif origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return args[0]
            return args[token] if 0 <= token < len(args) else None
    return None


def _bad_entry(value: Any, type_: Any, keys_only: bool = False) -> tuple[Any, Any, str | None] | None:
    """The first entry of the mapping ``value`` that its type (``type_``, a ``dict``) refuses:
    its key, the value type and, if the key is valid, the error about the value."""
    if not isinstance(value, dict):
        return None
    for option in type_options(type_):
        if (typing.get_origin(option) or option) is dict:
            args = typing.get_args(option)
            key_type, value_type = args if len(args) == 2 else (Any, Any)
            break
    else:
        return None
    for key, item in value.items():
        try:
            msgspec.convert(key, key_type)
        except msgspec.ValidationError:
            return key, value_type, None
        if keys_only:
            continue
        try:
            msgspec.convert(item, value_type)
        except msgspec.ValidationError as exc:
            return key, value_type, str(exc)
    return None


def key_part(key: Any) -> str:
    """A mapping key as a path part, written as in YAML."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _key_text(key: Any) -> str:
    """A mapping key for a message: a string quoted, anything else written as in YAML."""
    return repr(key) if isinstance(key, str) else key_part(key)


def _humane(text: str) -> str:
    """msgspec's wording, made to read as a sentence: ``Expected `int`, got `str``` → expected int, got str."""
    text = text.replace("`", "")
    return text[:1].lower() + text[1:] if text else text
