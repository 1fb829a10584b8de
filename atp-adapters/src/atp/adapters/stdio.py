"""Checks on the JSON lines an agent writes, for adapters that read them from a stream.

ATP decodes protocol messages with msgspec, which takes the last value of a key that appears
twice in one object, silently. :func:`duplicate_keys` finds such keys, so an adapter can warn
about a response like ``{"status": "failed", ..., "status": "completed"}``. It parses with the
standard library (slower than msgspec), so adapters call it on lines up to
:data:`DUPLICATE_CHECK_BYTES` only, and off the event loop (``anyio.to_thread``) on lines over
:data:`DUPLICATE_THREAD_BYTES`. Its time is linear in the size of the line.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, TypeAlias

DUPLICATE_CHECK_BYTES = 1024 * 1024
"""Lines longer than this are not checked for duplicate keys."""
DUPLICATE_THREAD_BYTES = 64 * 1024
"""Lines longer than this are checked on a worker thread, not on the event loop."""
MAX_PATHS = 10
"""How many duplicated keys :func:`duplicate_keys` names at most."""


class _Object(dict[str, Any]):
    """A JSON object some of whose keys appeared more than once."""

    duplicated: dict[str, None]
    """The keys that appeared more than once, in the order they first did so (a dict: an
    ordered set)."""


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
        duplicated: dict[str, None] = {}
        for key, _ in items:
            if key in seen:
                duplicated[key] = None
            else:
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
    # Where a value is: (its key or index, where its container is); a path is spelled only for
    # the duplicates named, so deep nesting under long keys costs no more than the data.
    paths: list[str] = []
    stack: list[tuple[Any, _Where]] = [(document, None)]
    while stack and len(paths) < MAX_PATHS:
        value, where = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _Object):
                paths.extend(
                    _path((key, where)) for key in itertools.islice(value.duplicated, MAX_PATHS - len(paths))
                )
            stack.extend((item, (key, where)) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, (index, where)) for index, item in reversed(list(enumerate(value))))
    return paths


_Where: TypeAlias = "tuple[str | int, _Where] | None"


def _path(where: _Where) -> str:
    """``$.a.b[0]["c d"]`` for where a value is."""
    parts: list[str] = []
    while where is not None:
        step, where = where
        if isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(f".{step}" if step.isidentifier() else f"[{json.dumps(step)}]")
    return "$" + "".join(reversed(parts))
