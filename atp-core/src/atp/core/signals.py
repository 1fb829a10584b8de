"""Ctrl-C and SIGTERM, watched one way for everything that stops on them.

Within an event loop, a signal must not raise :class:`KeyboardInterrupt` wherever the loop
happens to be: :func:`watch_signals` takes SIGINT and SIGTERM as messages instead, calls
``first`` with the first one (stop the runs in flight, keep what finished) and ``again`` with
every later one (stop what is still stopping at once). It watches only in the main thread (only
it receives signals) and on platforms that deliver them to an event loop; elsewhere it returns
at once, and the signals keep their default behaviour (where the platform cannot deliver them,
after a warning: :func:`atp.core.portability.lacking`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable

from atp.core.portability import lacking

__all__ = ["watch_signals"]


async def watch_signals(first: Callable[[int], None], again: Callable[[int], None]) -> None:
    """Call ``first(signal_number)`` on the first SIGINT or SIGTERM and ``again(signal_number)``
    on each later one, until cancelled. Start it in a task group and cancel it when done."""
    import anyio

    if threading.current_thread() is not threading.main_thread():
        return
    with contextlib.ExitStack() as stack:
        try:  # (asyncio says NotImplementedError on Windows as the handlers are added)
            signals = stack.enter_context(anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM))
        except (NotImplementedError, ValueError, AttributeError):  # not POSIX (Windows)
            lacking(
                "delivery of Ctrl-C and SIGTERM to the event loop",
                "Ctrl-C interrupts ATP at once: the runs in flight are not wound down and their "
                "agents may be left running, though every finished run is kept on disk",
            )
            return
        seen = False
        async for signum in signals:
            if not seen:
                seen = True
                first(int(signum))
            else:
                again(int(signum))
