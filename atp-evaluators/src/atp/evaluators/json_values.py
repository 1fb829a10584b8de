"""JSON values for ``equals``: a small path syntax to pick one value out of a document
(:func:`parse_path`, :func:`lookup`), and equality of JSON values that says where two differ
(:func:`difference`).

The path syntax is a subset of JSONPath, with no wildcards, filters or slices: one value is
named, or none::

    $                   the whole document
    $.report.title      keys (the leading ``$`` may be left out: report.title)
    $.items[0]          an item of an array by position; [-1] is the last
    $["a key"]          a key that is not a plain name, quoted ('a key' too)
    items.0             a position written as a key, on an array

Equality is JSON's, not Python's: ``true`` is not ``1``, ``1`` is ``1.0``, an array's order
counts, an object's does not. Both walks are iterative (no depth limit) and their work is
bounded by the expected value (the suite's), not by the agent's data.
"""

import json
import math
from typing import Any

from atp.core.text import shorten

Step = str | int

_KINDS = (
    (type(None), "null"),
    (bool, "a boolean"),
    (int, "a number"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (tuple, "an array"),
    (dict, "an object"),
)


def kind(value: Any) -> str:
    """What JSON type ``value`` is, for a message (``an object``, ``a number``, ...)."""
    for cls, name in _KINDS:
        if type(value) is cls:
            return name
    return f"a Python {type(value).__name__} (no JSON value)"


def not_json(value: Any) -> tuple[list[Step], str] | None:
    """Where ``value`` first holds something that is no JSON value, and what (``None``: it is
    all JSON): a Python type JSON has not (a date, bytes, a set), or an object key that is not
    a string. Iterative, as :func:`difference`."""
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if isinstance(item, dict):
            key = next((key for key in item if not isinstance(key, str)), None)
            if key is not None:
                return _path_of(link), f"has a key that is not a string: {shorten(repr(key), 80)}"
            stack.extend((item[key], (link, key)) for key in reversed(list(item)))
        elif isinstance(item, (list, tuple)):
            stack.extend((item[i], (link, i)) for i in reversed(range(len(item))))
        elif not any(type(item) is cls for cls, _ in _KINDS):
            return _path_of(link), f"is a Python {type(item).__name__}"
    return None


def parse_path(text: str) -> tuple[Step, ...]:
    """The steps of a path (``$.a.b[0]``); ValueError saying what is wrong and where."""
    source = text.strip()
    if not source:
        raise ValueError("'json_path' is empty; '$' names the whole document")
    steps: list[Step] = []
    at = 0
    shift = 0  # (a path without '$' and a leading '.' is read with one: positions shown as written)
    if source.startswith("$"):
        at = 1
    elif not source.startswith(("[", ".")):
        source, shift = "." + source, 1
    while at < len(source):
        char = source[at]
        if char == ".":
            end = at + 1
            while end < len(source) and source[end] not in ".[":
                end += 1
            key = source[at + 1 : end]
            if not key:
                raise ValueError(f"'json_path' {text!r} has an empty key at character {at + 1 - shift}")
            steps.append(key)
            at = end
        elif char == "[":
            step, at = _bracket(source, at, text)
            steps.append(step)
        else:
            raise ValueError(
                f"'json_path' {text!r}: expected '.' or '[' at character {at + 1 - shift}, found {char!r}"
            )
    return tuple(steps)


def _bracket(source: str, at: int, text: str) -> tuple[Step, int]:
    """The step of a ``[...]`` starting at ``at``, and where the path goes on after it."""
    end = source.find("]", at)
    inner = source[at + 1 : end] if end > 0 else ""
    if inner[:1] in ("'", '"'):
        quote = inner[0]
        close = source.find(quote + "]", at + 2)
        if close < 0:
            raise ValueError(f"'json_path' {text!r}: the quoted key at character {at + 2} is not closed")
        raw = source[at + 1 : close + 1]
        try:
            key = json.loads(raw) if quote == '"' else raw[1:-1]
        except ValueError:
            raise ValueError(f"'json_path' {text!r}: {raw} is not a valid quoted key") from None
        return key, close + 2
    if end < 0:
        raise ValueError(f"'json_path' {text!r}: the '[' at character {at + 1} is not closed")
    body = inner.strip()
    if body.lstrip("-").isdigit() and body.isascii():
        return int(body), end + 1
    raise ValueError(
        f"'json_path' {text!r}: [{inner}] is neither a position ([0], [-1]) nor a quoted key (['name'])"
    )


def show_path(steps: tuple[Step, ...] | list[Step]) -> str:
    """A path as ``equals`` shows it: ``$.report.items[0]``, ``$["a key"]``."""
    shown = ["$"]
    for step in steps:
        if isinstance(step, int):
            shown.append(f"[{step}]")
        elif step.isidentifier():
            shown.append(f".{step}")
        else:
            shown.append(f"[{json.dumps(step, ensure_ascii=False)}]")
    return "".join(shown)


def lookup(data: Any, steps: tuple[Step, ...]) -> tuple[Any, str | None]:
    """The value ``steps`` name in ``data``, or why there is none (``$.a is an array of 2
    items: it has no [5]``)."""
    current = data
    for depth, step in enumerate(steps):
        if isinstance(current, dict):
            if isinstance(step, str) and step in current:
                current = current[step]
                continue
            why = f"is an object without the key {json.dumps(str(step), ensure_ascii=False)}"
        elif isinstance(current, list):
            index = step if isinstance(step, int) else _index(step)
            if index is not None and -len(current) <= index < len(current):
                current = current[index]
                continue
            count = "1 item" if len(current) == 1 else f"{len(current)} items"
            why = (
                f"is an array, which has no key {json.dumps(step, ensure_ascii=False)}"
                if index is None
                else f"is an array of {count}: it has no [{index}]"
            )
        else:
            why = f"is {kind(current)}, not an object or an array"
        return None, f"{show_path(steps[:depth])} {why}"
    return current, None


def _index(step: str) -> int | None:
    return int(step) if step.isascii() and step.isdigit() else None


def _same_scalar(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected):
            return math.isnan(actual)
        return expected == actual
    return type(expected) is type(actual) and expected == actual


def difference(expected: Any, actual: Any) -> tuple[list[Step], str] | None:
    """Where ``actual`` first differs from ``expected`` as JSON values, and how (``None``:
    equal). The walk goes through ``expected`` only as far as the two agree; where it is is
    kept as links to the parent (no path is copied at each level)."""
    stack: list[tuple[Any, Any, Any]] = [(expected, actual, None)]  # link: (the parent's link, step)
    while stack:
        want, got, link = stack.pop()
        how: str | None = None
        if isinstance(want, dict):
            if not isinstance(got, dict):
                how = f"expected an object, got {kind(got)}"
            elif any(key not in got for key in want):
                absent = next(key for key in want if key not in got)
                how = f"the key {json.dumps(absent, ensure_ascii=False)} is missing"
            elif len(got) > len(want):
                extra = next(key for key in got if key not in want)
                how = f"there is a key not expected: {json.dumps(str(extra), ensure_ascii=False)}"
            else:
                stack.extend((want[key], got[key], (link, key)) for key in reversed(list(want)))
        elif isinstance(want, (list, tuple)):
            if not isinstance(got, (list, tuple)):
                how = f"expected an array, got {kind(got)}"
            elif len(got) != len(want):
                count = "1 item" if len(want) == 1 else f"{len(want)} items"
                how = f"expected an array of {count}, got {len(got)}"
            else:
                stack.extend((want[i], got[i], (link, i)) for i in reversed(range(len(want))))
        elif not _same_scalar(want, got):
            how = (
                f"expected {kind(want)}, got {kind(got)}" if kind(want) != kind(got) else "the values differ"
            )
        if how is not None:
            return _path_of(link), how
    return None


def _path_of(link: Any) -> list[Step]:
    steps: list[Step] = []
    while link is not None:
        link, step = link
        steps.append(step)
    return steps[::-1]
