"""Checks on the JSON lines an agent writes, for adapters that read them from a stream.

ATP decodes protocol messages with msgspec, which takes the last value of a key that appears
twice in one object, silently. :func:`duplicate_keys` finds such keys, so an adapter can warn
about a response like ``{"status": "failed", ..., "status": "completed"}``. It parses with the
standard library (slower than msgspec), so adapters call it on lines up to
:data:`DUPLICATE_CHECK_BYTES` only.
"""

from __future__ import annotations

import json
from typing import Any

DUPLICATE_CHECK_BYTES = 1024 * 1024
"""Lines longer than this are not checked for duplicate keys."""
MAX_PATHS = 10
"""How many duplicated keys :func:`duplicate_keys` names at most."""


class _Object(dict[str, Any]):
    """A JSON object some of whose keys appeared more than once."""

    duplicated: list[str]


def duplicate_keys(data: bytes | str) -> list[str]:
    """The keys that appear more than once in one JSON object of ``data``, as paths like
    ``$.status`` or ``$.artifacts[0].name`` in the order they come (at most
    :data:`MAX_PATHS`); ``[]`` when there are none, or when ``data`` is not JSON the standard
    library reads."""
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj: dict[str, Any] = dict(items)
        if len(obj) == len(items):
            return obj
        found = True
        seen: set[str] = set()
        duplicated: list[str] = []
        for key, _ in items:
            if key in seen and key not in duplicated:
                duplicated.append(key)
            seen.add(key)
        marked = _Object(obj)
        marked.duplicated = duplicated
        return marked

    try:
        document = json.loads(data, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return []
    if not found:
        return []
    paths: list[str] = []
    stack: list[tuple[str, Any]] = [("$", document)]
    while stack and len(paths) < MAX_PATHS:
        path, value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _Object):
                paths.extend(_key(path, key) for key in value.duplicated)
            stack.extend((_key(path, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in reversed(list(enumerate(value))))
    return paths[:MAX_PATHS]


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
