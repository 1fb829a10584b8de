"""Masking of secret values in everything ATP writes (results, events, logs, reports).

A secret can reach ATP in many spellings: literally, JSON-escaped (``\\"``), or as ``\\u``
escapes that decode to it. So JSON is masked on its decoded values (:meth:`Masker.value` walks
Structs and data, and the caller encodes the result again), never by replacing bytes in encoded
JSON, which could hit ATP's own field names (a secret ``test`` inside ``"test_id"``) and leave a
file ATP cannot read back. Only string values are masked; field names, the fixed words of
ATP's own format (``Literal`` fields such as a status) and the identifiers a Struct lists in
``__atp_unmasked__`` (file names, ids) are left as they are. Free text (an agent's log lines)
is masked with :meth:`Masker.text`.
"""

from __future__ import annotations

import builtins
import functools
import json
from collections.abc import Iterable
from typing import Any

import msgspec
import msgspec.inspect as mi

MASK = "***"
MIN_SECRET_LENGTH = 4
SECRET_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL")
TOO_DEEP = "[nested too deeply to mask: left out]"
_SHORT_ESCAPED = '"\\/\b\f\n\r\t'
"""The characters JSON spells with a two-character escape (``\\n``, ``\\/`` ...)."""


def looks_secret(variable: str) -> bool:
    """Whether an environment variable's name suggests its value is a secret."""
    upper = variable.upper()
    return any(hint in upper for hint in SECRET_NAME_HINTS)


class Masker:
    """Replaces every known secret value with ``***``. Values shorter than 4 characters are
    not masked: they would mask ordinary text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
        ordered = sorted(values, key=len, reverse=True)
        self._text = tuple(ordered)
        # The spellings a secret has in JSON text written without escapes other than the
        # JSON-required ones: used only to decide quickly that raw JSON holds no secret.
        forms = {s.encode() for s in ordered} | {json.dumps(s, ensure_ascii=False)[1:-1].encode() for s in ordered}
        self._bytes = tuple(sorted(forms, key=len, reverse=True))
        # Whether some secret holds a character JSON may spell with a short escape (\/ for /).
        self._escapable = any(c in s for s in ordered for c in _SHORT_ESCAPED)

    def __bool__(self) -> bool:
        return bool(self._text)

    def text(self, value: str) -> str:
        """Free text with every secret replaced."""
        for secret in self._text:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def bytes(self, value: builtins.bytes) -> builtins.bytes:
        """Raw bytes that are not JSON (an agent's log) with every literal secret replaced."""
        for secret in self._bytes:
            if secret in value:
                value = value.replace(secret, MASK.encode())
        return value

    def clean_json(self, data: builtins.bytes) -> bool:
        """Whether JSON text certainly holds no secret in any spelling: it has no ``\\u``
        escape (which can spell any character), no other escape that can spell a character of
        a secret, and no secret literally. When this is false, decode it, mask with
        :meth:`value` and encode again."""
        if b"\\" in data and (b"\\u" in data or self._escapable):
            return False
        return not any(secret in data for secret in self._bytes)

    def value(self, obj: Any) -> Any:
        """``obj`` (a Struct, or plain data) with secrets masked in its string values; the
        same object when nothing changed."""
        try:
            return self._value(obj)
        except RecursionError:
            return TOO_DEEP

    def _value(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, msgspec.Struct):
            changes: dict[str, Any] = {}
            for name in _masked_fields(type(obj)):
                old = getattr(obj, name)
                new = self._value(old)
                if new is not old:
                    changes[name] = new
            return msgspec.structs.replace(obj, **changes) if changes else obj
        if isinstance(obj, dict):
            items = [(self._value(k) if isinstance(k, str) else k, self._value(v)) for k, v in obj.items()]
            if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, obj.items(), strict=True)):
                return obj
            return dict(items)
        if isinstance(obj, (list, tuple)):
            out = [self._value(item) for item in obj]
            if all(a is b for a, b in zip(out, obj, strict=True)):
                return obj
            return out if isinstance(obj, list) else tuple(out)
        return obj


_NO_TEXT = (mi.LiteralType, mi.IntType, mi.FloatType, mi.BoolType, mi.NoneType, mi.DateTimeType, mi.EnumType)


def _may_hold_text(t: mi.Type) -> bool:
    if isinstance(t, mi.UnionType):
        return any(_may_hold_text(member) for member in t.types)
    return not isinstance(t, _NO_TEXT)


@functools.cache
def _masked_fields(cls: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of a Struct that may hold text to mask."""
    exempt: frozenset[str] = getattr(cls, "__atp_unmasked__", frozenset())
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return tuple(f.name for f in info.fields if f.name not in exempt and _may_hold_text(f.type))
