"""Masking of secret values in everything ATP writes (results, events, logs, reports)."""

from __future__ import annotations

import json
from collections.abc import Iterable

MASK = "***"
MIN_SECRET_LENGTH = 4
SECRET_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL")


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
        # A secret inside JSON text may be escaped ("\\" or "\"" in it): mask that form too.
        forms = {s.encode() for s in ordered} | {json.dumps(s, ensure_ascii=False)[1:-1].encode() for s in ordered}
        self._bytes = tuple(sorted(forms, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._text)

    def text(self, value: str) -> str:
        for secret in self._text:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def bytes(self, value: bytes) -> bytes:
        for secret in self._bytes:
            if secret in value:
                value = value.replace(secret, b"***")
        return value
