"""What a failed check quotes of an agent's data, bounded and with the run's secrets masked
before any cut: a compact JSON preview of a value (:func:`preview`), and the excerpt of a text
around where it comes closest to a pattern it does not contain (:func:`nearest`). Both take the
run's secrets as ``masker`` (an evaluator passes :attr:`~atp.core.evaluator.EvalContext.masker`)."""

import difflib
import json
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from atp.core.secrets import Masker
from atp.core.text import mask, piece, shorten

VALUE_CHARS = 120
"""A value quoted as evidence (the one a schema rejected) is shown up to this many characters."""
EXCERPT_CONTEXT = 60
"""An excerpt around the closest match shows this many characters on either side of it."""
EXCERPT_CHARS = 160
"""An excerpt of the start of a text is this many characters long."""
NEAR_WORK = 4_000_000
"""How much work looking for the longest piece of a pattern in a text may do (characters of
text times characters of pattern): it looks in the first ``NEAR_WORK // len(pattern)``
characters of the text, and not at all for a pattern so long that this is under 1024."""

_END = object()


def preview(value: Any, limit: int = VALUE_CHARS, *, masker: Masker | None = None) -> str:
    """JSON-like ``value`` as compact JSON, at most ``limit`` characters (and ``…``), the
    secrets of ``masker`` (the run's) masked. Only what is shown is built, however large the
    value; a cut leaves no part of a secret."""
    parts: list[str] = []
    size = 0
    stack: list[tuple[Iterator[Any], bool]] = []  # (the items left, a mapping?)
    current = value
    while True:
        if isinstance(current, dict):
            text = "{"
            stack.append((iter(current.items()), True))
        elif isinstance(current, (list, tuple)):
            text = "["
            stack.append((iter(current), False))
        elif isinstance(current, str):
            text = json.dumps(current[: limit + 1], ensure_ascii=False)
        else:
            try:
                text = json.dumps(current)
            except (TypeError, ValueError):
                text = shorten(repr(current), limit + 1, masker)
        parts.append(text)
        size += len(text)
        following = False
        while stack and size <= limit:
            items, mapping = stack[-1]
            item: Any = next(items, _END)
            if item is _END:
                stack.pop()
                parts.append("}" if mapping else "]")
                size += 1
                continue
            opened = parts[-1] in ("{", "[")
            if mapping:
                key, current = item
                text = ("" if opened else ", ") + json.dumps(str(key)[: limit + 1], ensure_ascii=False) + ": "
            else:
                current, text = item, "" if opened else ", "
            parts.append(text)
            size += len(text)
            following = True
            break
        if size > limit:
            return piece("".join(parts), masker)[:limit] + "…"
        if not following:
            return mask("".join(parts), masker)


class Sought(Protocol):
    """What a ``contains`` assertion looks for."""

    @property
    def pattern(self) -> str: ...

    @property
    def regex(self) -> bool: ...

    @property
    def ignore_case(self) -> bool: ...


class Near(NamedTuple):
    """Where a text comes closest to a pattern it does not contain, for a failed check."""

    rank: int
    """How close: 2 (the pattern in another case), 1 (a piece of the pattern), 0 (neither:
    the excerpt is the start of the text)."""
    size: int
    """The length of what was found."""
    found: str | None
    """What was found (``None``: nothing)."""
    line: int | None
    excerpt: str
    """The text around it (or the start of the text), secrets masked, bounded."""


def line_of(text: str, index: int) -> int:
    """The line (1: the first) of ``text`` that character ``index`` is on."""
    return text.count("\n", 0, index) + 1


def _same_length_fold(text: str) -> str | None:
    """``text`` case-folded with every character where it was (``None`` when folding would
    move them: ``ß`` folds to ``ss``)."""
    for fold in (str.casefold, str.lower):
        folded = fold(text)
        if len(folded) == len(text):
            return folded
    return None


def _excerpt(text: str, at: int, size: int) -> str:
    start = max(0, at - EXCERPT_CONTEXT)
    end = min(len(text), at + min(size, EXCERPT_CHARS) + EXCERPT_CONTEXT)
    return f"{'…' if start else ''}{text[start:end]}{'…' if end < len(text) else ''}"


def nearest(text: str, config: Sought, *, masker: Masker | None = None) -> Near:
    """Where ``text``, which does not contain the pattern, comes closest to it: the pattern in
    another case; else the longest piece of it (``difflib``, in the first ``NEAR_WORK //
    len(pattern)`` characters of the text, see :data:`NEAR_WORK`), when that is at least a
    third of the pattern and 4 characters long; else nothing, and the excerpt is the start of
    the text. A regex is not looked for in pieces: its excerpt is the start of the text.
    The secrets of ``masker`` (the run's) are masked first."""
    text = mask(text, masker)
    start = Near(0, 0, None, None, text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else ""))
    if config.regex or not text:
        return start
    pattern = config.pattern
    folded = _same_length_fold(text)
    if not config.ignore_case and folded is not None:
        needle = pattern.casefold()
        at = folded.find(needle)
        if at >= 0:
            size = len(needle)
            return Near(2, size, text[at : at + size], line_of(text, at), _excerpt(text, at, size))
    haystack, needle = text, pattern
    if config.ignore_case and folded is not None:
        haystack, needle = folded, pattern.casefold()
    window = NEAR_WORK // max(1, len(needle))
    if window < 1024:  # a pattern of thousands of characters: not looked for in pieces
        return start
    matcher = difflib.SequenceMatcher(None, haystack[:window], needle, autojunk=False)
    match = matcher.find_longest_match(0, min(window, len(haystack)), 0, len(needle))
    if match.size >= 4 and match.size * 3 >= len(needle):
        at, size = match.a, match.size
        return Near(1, size, text[at : at + size], line_of(text, at), _excerpt(text, at, size))
    return start
