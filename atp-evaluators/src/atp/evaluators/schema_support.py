"""What the ``schema`` evaluator needs around jsonschema: the expressions of a schema matched
with a time limit (:func:`time_limit_schema_patterns`), and its errors worded as evidence:
where in the data (:func:`json_path`), what the schema expected, the value it rejected
(:func:`failure`, :func:`explained`)."""

import importlib
import json
from typing import Any

from atp.core.plugins import require
from atp.core.secrets import Masker
from atp.core.text import mask, shorten
from atp.evaluators.evidence import preview

MESSAGE_CHARS = 160
"""A JSON Schema error message longer than this (it quotes a large value) is replaced by what
the schema expected and a preview of the value."""
_VALUE_NOT_QUOTED = frozenset(
    {
        "const",
        "required",
        "dependentRequired",
        "dependencies",
        "dependentSchemas",
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
        "propertyNames",
    }
)
"""The keywords whose error messages do not quote the value they rejected."""


class _TimedRe:
    """What jsonschema uses of Python's ``re`` (``search``, ``compile``, ``match``), from the
    ``regex`` module with a time limit per match: ``pattern``, ``patternProperties`` and
    ``additionalProperties`` apply a schema's expressions to an agent's strings, and one
    expression can take longer than the universe's age on a string of 40 characters. A match
    past the limit raises TimeoutError."""

    def __init__(self, rx: Any, original: Any, timeout: float) -> None:
        self._rx = rx
        self._original = original
        self.timeout = timeout

    def search(self, pattern: Any, string: str, flags: int = 0) -> Any:
        return self._rx.search(pattern, string, flags | self._rx.V0, timeout=self.timeout, concurrent=True)

    def match(self, pattern: Any, string: str, flags: int = 0) -> Any:
        return self._rx.match(pattern, string, flags | self._rx.V0, timeout=self.timeout, concurrent=True)

    def __getattr__(self, name: str) -> Any:  # compile, flags, error: as re has them
        return getattr(self._original, name)


_timed_re: _TimedRe | None = None


def time_limit_schema_patterns(jsonschema: Any, timeout: float) -> None:
    """Make jsonschema match the expressions of schemas with a time limit (once per process;
    ``timeout`` is the latest one asked for)."""
    global _timed_re
    if _timed_re is None:
        import re

        rx = require("regex", install="atp-evaluators", feature="the schema evaluator")
        _timed_re = _TimedRe(rx, re, timeout)
        for module in ("_keywords", "_utils"):
            found: Any = getattr(jsonschema, module, None)  # (jsonschema's internals: untyped)
            if found is None:
                found = importlib.import_module(f"jsonschema.{module}")
            if getattr(found, "re", None) is re:
                found.re = _timed_re
    _timed_re.timeout = timeout


def json_path(parts: Any, masker: Masker | None = None) -> str:
    """Where a value is in a JSON document: ``$.competitors[0].share``, ``$["a b"]``; keys (the
    agent's) shortened, the secrets of ``masker`` (the run's) masked first."""
    steps = []
    for part in parts:
        if isinstance(part, int):
            steps.append(f"[{part}]")
        else:
            key = shorten(str(part), 80, masker)
            steps.append(f".{key}" if key.isidentifier() else f"[{json.dumps(key, ensure_ascii=False)}]")
    return shorten("$" + "".join(steps), 400, masker)


def failure(error: Any, masker: Masker | None = None) -> dict[str, Any]:
    """What one JSON Schema error says: where, what the schema expected, the value it rejected
    (the agent's data quoted with the secrets of ``masker``, the run's, masked)."""
    return {
        "path": json_path(error.absolute_path, masker),
        "expected": f"{error.validator}: {preview(error.validator_value, 80)}",
        "actual": preview(error.instance, masker=masker),
        "message": shorten(error.message, MESSAGE_CHARS, masker),
    }


def explained(error: Any, said: dict[str, Any], masker: Masker | None = None) -> str:
    """One error for a check message (``said`` is its :func:`failure`): jsonschema's words when
    short (the secrets of ``masker``, the run's, masked), with the value they leave out; else
    what was expected and the value."""
    if len(error.message) > MESSAGE_CHARS:
        return f"at {said['path']}: expected {said['expected']}; got {said['actual']}"
    got = f" (got {said['actual']})" if error.validator in _VALUE_NOT_QUOTED else ""
    return f"at {said['path']}: {mask(error.message, masker)}{got}"
