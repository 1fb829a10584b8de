"""How ``tool_called_with`` compares a call's input with its config: an input sent as JSON text
read as its object (:func:`as_input`), ``input`` as a subset, ``input_regex`` field by field
(dotted paths, :func:`parse_field`) with a time limit per match; :class:`InputJudge` says which
conditions a call does not meet (see :mod:`atp.evaluators.tools` for the rules)."""

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from atp.core.secrets import Masker
from atp.core.text import shorten
from atp.evaluators.evidence import preview
from atp.evaluators.patterns import compile_regex
from atp.evaluators.tool_reading import plural

MISMATCH_CHARS = 80
"""A value in a mismatch (what a field has) is quoted up to this many characters."""
MAX_JSON_INPUT = 16 * 1024 * 1024
"""An input sent as JSON text is read as an object only up to this many characters."""


def _field_name(parts: Iterable[str | int]) -> str:
    return ".".join(str(part) for part in parts)


def parse_field(path: str) -> tuple[str, ...]:
    """A dotted field path of ``input_regex`` as its parts; ValueError when a part is empty."""
    parts = tuple(path.split("."))
    if not path.strip() or any(not part for part in parts):
        raise ValueError(
            f"'input_regex' has the field {shorten(path, 80)!r}, which is not a dotted path; name a field "
            "by its keys joined with dots (query, filters.region)"
        )
    return parts


@lru_cache(maxsize=512)
def compiled_pattern(pattern: str, key: str) -> Any:
    """An ``input_regex`` expression compiled once (when the suite loads; each run finds it here)."""
    return compile_regex(pattern, False, key, feature="the tool_called_with evaluator with input_regex")


class RegexTimedOut(Exception):
    """A field's expression took longer than its time limit on a call's input."""

    def __init__(self, field: str, call: int) -> None:
        super().__init__(field, call)
        self.field = field
        self.call = call


def as_input(value: Any) -> Any:
    """A call's input as ATP compares it: JSON text holding an object is read as the object."""
    if isinstance(value, str) and len(value) <= MAX_JSON_INPUT and value.lstrip()[:1] == "{":
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict):
            return parsed
    return value


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def _equal(expected: Any, actual: Any) -> bool:
    """Scalars as JSON compares them: numbers by value, a boolean only with a boolean."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    return type(expected) is type(actual) and expected == actual


def _subset_mismatch(
    expected: Any, actual: Any, at: list[str | int], masker: Masker | None = None
) -> str | None:
    """Why ``actual`` does not have ``expected`` (see the module docs), or ``None``; the values
    quoted with the secrets of ``masker`` masked. Recurses as deep as ``expected``, which the
    suite wrote (the agent's data is never walked further)."""
    where = _field_name(at)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {_kind(actual)} {preview(actual, MISMATCH_CHARS, masker=masker)}"
        for key, value in expected.items():
            if key not in actual:
                return f"{_field_name([*at, key])}: missing"
            found = _subset_mismatch(value, actual[key], [*at, key], masker)
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{where}: expected a list, got {_kind(actual)} {preview(actual, MISMATCH_CHARS, masker=masker)}"
        if len(actual) != len(expected):
            return (
                f"{where}: expected {plural(len(expected), 'item')}, got {len(actual)} "
                f"{preview(actual, MISMATCH_CHARS, masker=masker)}"
            )
        for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
            found = _subset_mismatch(want, have, [*at, index], masker)
            if found is not None:
                return found
        return None
    if _equal(expected, actual):
        return None
    got = preview(actual, MISMATCH_CHARS, masker=masker)
    return f"{where}: expected {preview(expected, MISMATCH_CHARS)}, got {got}"


def _lookup(value: Any, parts: tuple[str, ...]) -> tuple[bool, Any]:
    """The value at a dotted field path, and whether it is there."""
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isascii() and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def _text(value: Any) -> str | None:
    """A field's value as the text its expression is matched against (``None``: nested too
    deeply to write as JSON)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        return None


class InputJudge:
    """Tells which conditions of a config (its ``input`` and ``input_regex``) a call's input does
    not meet; what it quotes of an input has the secrets of ``masker`` (the run's) masked."""

    def __init__(
        self,
        input: dict[str, Any] | None,
        input_regex: dict[str, str] | None,
        timeout: float,
        masker: Masker | None = None,
    ) -> None:
        self.input = input or {}
        self.regexes = [
            (path, parse_field(path), pattern, compiled_pattern(pattern, f"input_regex.{shorten(path, 80)}"))
            for path, pattern in (input_regex or {}).items()
        ]
        self.timeout = timeout
        self.masker = masker
        self.conditions = len(self.input) + len(self.regexes)

    def mismatches(self, value: Any, call: int) -> list[str]:
        """One line per condition that ``value`` (a call's input, see :func:`as_input`) does not
        meet: all conditions are looked at, for the score."""
        failed: list[str] = []
        if self.input:
            if not isinstance(value, dict):
                got = (
                    "no input"
                    if value is None
                    else f"{_kind(value)} {preview(value, MISMATCH_CHARS, masker=self.masker)}"
                )
                failed.extend(f"{key}: missing (the input is {got})" for key in self.input)
            else:
                for key, want in self.input.items():
                    found = (
                        _subset_mismatch(want, value[key], [key], self.masker)
                        if key in value
                        else f"{key}: missing"
                    )
                    if found is not None:
                        failed.append(found)
        for path, parts, pattern, compiled in self.regexes:
            present, field = _lookup(value, parts)
            if not present:
                failed.append(f"{path}: missing")
                continue
            text = _text(field)
            if text is None:
                failed.append(f"{path}: nested too deeply for ATP to read")
                continue
            try:
                matched = compiled.search(text, timeout=self.timeout, concurrent=True)
            except TimeoutError:
                raise RegexTimedOut(path, call) from None
            if matched is None:
                failed.append(
                    f"{path}: {preview(field, MISMATCH_CHARS, masker=self.masker)} does not match {shorten(pattern, 80)!r}"
                )
        return failed
