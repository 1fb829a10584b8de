"""Agent text made safe to show: control characters escaped, length bounded.

Anything an agent sends is untrusted. Printed raw, its escape sequences could clear a terminal,
forge a "passed" line or set the window title; shown whole, one line could be megabytes. Every
reporter and message that shows agent text passes it through :func:`printable` (and
:func:`shorten` where a preview is enough). Secrets are masked before either (a cut must never
split a secret: mask first, then shorten).

Which secrets: the masker given (``masker=``), which ATP's own code always passes (an adapter has
the run's on its sink and on itself, an evaluator on its :class:`~atp.core.evaluator.EvalContext`).
Without one, the masker of the run in progress (a context variable the runner sets for a whole
suite, see :func:`masking`): that fallback is there for a third-party plugin's helper that has no
masker at hand, and nothing in ATP relies on it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

PREVIEW_CHARS = 200


class _Masks(Protocol):
    def text(self, value: str) -> str: ...

    def piece(self, value: str) -> str: ...


_masker: ContextVar[_Masks | None] = ContextVar("atp_masker", default=None)

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode format characters that
# reorder or hide text (bidirectional overrides and isolates, zero-width marks).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_CONTROL_OR_NEWLINE = re.compile(_CONTROL.pattern[:-1] + "\t\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with control characters shown as escapes (``\\e[2J`` instead of clearing the
    screen). Newlines and tabs are kept when ``newlines`` is true, escaped otherwise."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def shorten(text: str, limit: int = PREVIEW_CHARS, masker: _Masks | None = None) -> str:
    """At most ``limit`` characters, with how much was left out, secrets masked first
    (``masker``, else the current run's: see :func:`masking`), so a cut never leaves half a
    secret."""
    masker = masker if masker is not None else _masker.get()
    if masker is not None:
        text = masker.text(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def shown(text: str | bytes, masker: _Masks | None = None, limit: int = PREVIEW_CHARS) -> str:
    """Text from outside ATP (an agent's, a tool's, a judge's) for a message or a report line:
    decoded, its secrets masked first (``masker``, else the current run's), then cut to
    ``limit`` characters (a cut never splits a secret), then its control characters escaped."""
    value = as_text(text)
    masker = masker if masker is not None else _masker.get()
    if masker is not None:
        value = masker.text(value)
    if len(value) > limit:
        value = f"{value[:limit]}… ({len(value) - limit} more characters)"
    return printable(value)


def describe(value: object, masker: _Masks | None = None) -> str:
    """A value for an error message: its type and a short repr, secrets masked (``masker``)
    before it is cut (a ``repr`` that raises, or recurses without end, is named instead of
    raising here)."""
    if value is None:
        return "None"
    if isinstance(value, str):  # (masked before repr() escapes it: a spelling of a spelling)
        value = mask(value, masker)
    return f"{type(value).__name__} {printable(shorten(guarded_repr(value), 120, masker))}"


def guarded_repr(value: object) -> str:
    """``repr(value)`` whole (an error's evidence), or a note naming the value's type when its
    ``repr`` raises (a hostile ``__repr__``: the message must still be made)."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose repr() raised {type(exc).__name__}>"


def mask(text: str, masker: _Masks | None = None) -> str:
    """``text`` with secrets masked (``masker``, else the current run's; as it is when there
    is neither)."""
    masker = masker if masker is not None else _masker.get()
    return text if masker is None else masker.text(text)


def piece(text: str, masker: _Masks | None = None) -> str:
    """A piece of a longer stream that was cut (a line past its size limit): masked
    (``masker``, else the current run's) and without the last characters that could begin a
    secret (see :func:`masking`)."""
    masker = masker if masker is not None else _masker.get()
    return text if masker is None else masker.piece(text)


@contextlib.contextmanager
def masking(masker: _Masks | None) -> Iterator[None]:
    """Within this block (and the tasks started in it), :func:`shorten`, :func:`mask`,
    :func:`piece` and :func:`shown` called without a masker use ``masker``. The runner sets it
    for a whole suite, for third-party helpers that have no masker at hand; ATP's own code passes
    its masker explicitly."""
    token = _masker.set(masker)
    try:
        yield
    finally:
        _masker.reset(token)


def as_text(data: str | bytes) -> str:
    """Bytes from an agent as text; bytes that are not UTF-8 become U+FFFD."""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")
