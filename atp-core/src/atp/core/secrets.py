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
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import msgspec.inspect as mi

MASK = "***"
MIN_SECRET_LENGTH = 4
SECRET_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL")
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
        self.longest = len(ordered[0]) if ordered else 0
        """The length of the longest secret."""
        # The spellings a secret has in JSON text written without escapes other than the
        # JSON-required ones: used only to decide quickly that raw JSON holds no secret.
        forms = {s.encode() for s in ordered} | {
            json.dumps(s, ensure_ascii=False)[1:-1].encode() for s in ordered
        }
        self._bytes = tuple(sorted(forms, key=len, reverse=True))
        # Whether some secret holds a character JSON may spell with a short escape (\/ for /).
        self._escapable = any(c in s for s in ordered for c in _SHORT_ESCAPED)
        # Every spelling of every secret in text that may hold escapes (JSON's \u00e4 and \/,
        # Python's \xe4 and \\): one expression, longest secrets first.
        self._spelled = re.compile("|".join(_spellings(s) for s in ordered)) if ordered else None

    def __bool__(self) -> bool:
        return bool(self._text)

    def with_secrets(self, more: Iterable[str]) -> Masker:
        """A masker of these secrets and ``more`` (this one when ``more`` adds none)."""
        added = [
            s for s in more if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH and s not in self._text
        ]
        return Masker((*self._text, *added)) if added else self

    def text(self, value: str) -> str:
        """Text with every secret replaced, also where it is spelled with escapes (JSON's or
        Python's: a line an agent wrote, a ``repr``)."""
        for secret in self._text:
            if secret in value:
                value = value.replace(secret, MASK)
        if "\\" in value and self._spelled is not None:
            value = self._spelled.sub(MASK, value)
        return value

    def piece(self, value: str) -> str:
        """A piece of a longer stream whose continuation is not known (a line cut at its size
        limit), masked, without the last characters that could begin a secret: what is left
        shows no part of one."""
        if self._spelled is None:
            return value
        # The longest spelling of a secret: \\ud83d\\ude00 spells one character in 12.
        longest = self.longest * (12 if "\\" in value else 1)
        keep = len(value) - (longest - 1)
        out: list[str] = []
        at = 0
        for found in self._spelled.finditer(value):
            if found.start() >= keep:
                break
            out.append(value[at : found.start()])
            out.append(MASK)
            at = found.end()
        if at < keep:
            out.append(value[at:keep])
        return "".join(out)

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
        """``obj`` (a Struct, or plain data, nested however deep) with secrets masked in its
        string values and in the keys of its mappings; the same object when nothing changed."""
        if isinstance(obj, str):
            return self.text(obj)
        if not isinstance(obj, _CONTAINERS):
            return obj
        # Depth-first without recursion: agent data may nest as deep as the decoders allow.
        stack = [_Frame(obj)]
        while True:
            frame = stack[-1]
            if frame.index < len(frame.values):
                item = frame.values[frame.index]
                frame.index += 1
                if isinstance(item, str):
                    frame.out.append(self.text(item))
                elif isinstance(item, _CONTAINERS):
                    stack.append(_Frame(item))
                else:
                    frame.out.append(item)
                continue
            stack.pop()
            built = frame.build(self)
            if not stack:
                return built
            stack[-1].out.append(built)


_CONTAINERS = (msgspec.Struct, dict, list, tuple)


class _Frame:
    """One container being masked: its values, the masked ones so far."""

    __slots__ = ("index", "obj", "out", "values")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.index = 0
        self.out: list[Any] = []
        if isinstance(obj, msgspec.Struct):
            self.values: list[Any] = [getattr(obj, name) for name in _masked_fields(type(obj))]
        elif isinstance(obj, dict):
            self.values = list(obj.values())
        else:
            self.values = list(obj)

    def build(self, masker: Masker) -> Any:
        obj, out = self.obj, self.out
        same = all(a is b for a, b in zip(out, self.values, strict=True))
        if isinstance(obj, msgspec.Struct):
            if same:
                return obj
            names = _masked_fields(type(obj))
            return msgspec.structs.replace(
                obj, **{n: v for n, v, old in zip(names, out, self.values, strict=True) if v is not old}
            )
        if isinstance(obj, dict):
            keys = [masker.text(k) if isinstance(k, str) else k for k in obj]
            if same and all(a is b for a, b in zip(keys, obj, strict=True)):
                return obj
            return dict(zip(keys, out, strict=True))
        if same:
            return obj
        return out if isinstance(obj, list) else tuple(out)


def _spellings(secret: str) -> str:
    """An expression matching ``secret`` with any of its characters spelled as JSON or Python
    would escape it (hex digits in either case)."""
    parts = []
    for char in secret:
        code = ord(char)
        if code < 0x10000:
            forms = [re.escape(char), "\\\\u" + _hex(code, 4)]
        else:
            forms = [re.escape(char), _surrogates(code), "\\\\U" + _hex(code, 8)]
        if code < 0x100:
            forms.append("\\\\x" + _hex(code, 2))
        short = _SHORT_FORMS.get(char)
        if short is not None:
            forms.append(re.escape(short))
        parts.append(f"(?:{'|'.join(forms)})")
    return "".join(parts)


def _hex(code: int, width: int) -> str:
    """``code`` in hex as an expression that accepts either case: ``00[eE]4``."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:0{width}x}")


def _surrogates(code: int) -> str:
    high = 0xD800 + ((code - 0x10000) >> 10)
    low = 0xDC00 + ((code - 0x10000) & 0x3FF)
    return "\\\\u" + _hex(high, 4) + "\\\\u" + _hex(low, 4)


_SHORT_FORMS = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "'": "\\'",
}


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
