"""What the two evaluators of tool calls share: reading the trace's calls on the event loop or on
a worker thread that stops soon after its evaluation is cancelled (:func:`run_reading`), and
counts and call numbers in words."""

from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread

from atp.evaluators.offload import off_loop

SHOWN_MATCHED = 20
"""How many call numbers of matching calls a check lists."""
CHECKPOINT_EVERY = 256
"""On a worker thread, the trace reading checks every this many events whether the evaluation
was cancelled (its time ran out), so an abandoned thread stops soon after."""


def plural(count: int, word: str) -> str:
    """``1 call``, ``2 calls``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def call_numbers(numbers: list[int], total: int) -> str:
    """Call numbers for a message: ``call 3``, ``calls 1, 4`` (and how many more)."""
    shown = ", ".join(str(n) for n in numbers)
    more = f" and {total - len(numbers)} more" if total > len(numbers) else ""
    return f"{'call' if total == 1 else 'calls'} {shown}{more}"


def checkpoint(on_thread: bool) -> Callable[[], None]:
    """What the trace reading calls now and then: on a worker thread, raises the cancellation
    of the evaluation that started it (its time ran out); on the event loop, nothing."""
    return anyio.from_thread.check_cancelled if on_thread else _nothing


def _nothing() -> None:
    return None


async def run_reading(on_thread: bool, work: Callable[..., Any], *args: Any) -> Any:
    """``work(*args, checkpoint)``, on a worker thread or on the event loop."""
    if on_thread:
        return await off_loop(-1, work, *args, checkpoint(True))
    return work(*args, checkpoint(False))
