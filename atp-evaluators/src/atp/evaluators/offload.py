"""Work on an agent's data kept off the event loop once the data is large: :func:`off_loop` runs
it on a worker thread past :data:`INLINE_CHARS` (a thread hop costs more than small work), and
:func:`small_data` tells cheaply whether JSON-like data is that small."""

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

INLINE_CHARS = 64 * 1024
"""Work on agent data up to about this many characters runs on the event loop (a thread hop
would cost more than the work); larger data goes to a worker thread."""

_T = TypeVar("_T")


async def off_loop(size: int, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, on a worker thread when ``size`` (of the agent data it works on) is
    over :data:`INLINE_CHARS`, on the event loop otherwise (``size=-1``: always a thread)."""
    if 0 <= size <= INLINE_CHARS:
        return work(*args)
    return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)


def small_data(data: Any, limit: int = INLINE_CHARS) -> bool:
    """Whether JSON-like ``data`` is about ``limit`` characters of JSON or less. Stops looking
    as soon as it is larger, so the answer costs little even for very large data."""
    budget = limit
    stack = [data]
    while stack:
        item = stack.pop()
        budget -= 8
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                budget -= 8 + (len(key) if isinstance(key, str) else 0)
                stack.append(value)
                if budget < 0:
                    return False
        elif isinstance(item, (list, tuple)):
            for value in item:
                budget -= 1
                stack.append(value)
                if budget < 0:
                    return False
        if budget < 0:
            return False
    return True
