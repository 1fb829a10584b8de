"""Agent code run in ATP's own process, kept out of ATP's control flow.

The in-process adapters (``python``, ``langgraph``, ``crewai``) import an agent's module and call
its objects in ATP's process. Whatever that code raises is the agent's: not only an
``Exception`` but ``KeyboardInterrupt`` (which would stop ATP as a Ctrl-C does), ``SystemExit``,
a ``CancelledError`` of its own making (which would pass for ATP cancelling the run: every test
"not run", no reason given) and any other ``BaseException`` subclass. Only ATP's own
cancellation of the run (its time limit, Ctrl-C, a stopped suite) is ATP's.

Every way agent code is entered goes through one of two helpers, which turn whatever the agent
raised into :class:`AgentRaised` (an ``Exception`` carrying it) and let ATP's cancellation alone
through:

- :func:`call_agent` calls agent code synchronously (an import, a lookup, a plain function in a
  worker thread, a graph's factory);
- :func:`await_agent` awaits agent code on the event loop (an ``async def`` agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["AgentRaised", "await_agent", "call_agent", "cancelled_by_atp"]

_T = TypeVar("_T")


class AgentRaised(Exception):
    """Agent code raised :attr:`raised` (any ``BaseException`` but ATP's cancellation)."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(f"{type(raised).__name__}: {raised}" if str(raised) else type(raised).__name__)
        self.raised = raised


def cancelled_by_atp(exc: BaseException) -> bool:
    """Whether ``exc``, caught around agent code, is ATP cancelling the task it arrived in: the
    backend's cancellation exception while the current task is being cancelled. A
    ``CancelledError`` an agent raised itself (or one that crossed from a worker thread) is
    not: on asyncio the task then has no cancellation pending. Trio's ``Cancelled`` cannot be
    made by user code: it is always ATP's."""
    if not isinstance(exc, asyncio.CancelledError):
        # (trio's Cancelled cannot be made by user code: on trio it is always ATP's)
        return type(exc).__name__ == "Cancelled" and type(exc).__module__.startswith("trio")
    try:
        task = asyncio.current_task()
    except RuntimeError:  # in a worker thread: no cancellation of ATP's reaches here
        return False
    cancelling = getattr(task, "cancelling", None)  # (Python 3.11 and later)
    return cancelling is not None and cancelling() > 0


def call_agent(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` (agent code, called synchronously); whatever it raises is the
    agent's, as :class:`AgentRaised`, except ATP's own cancellation."""
    try:
        return function(*args)
    except BaseException as exc:
        if cancelled_by_atp(exc):
            raise
        raise AgentRaised(exc).with_traceback(exc.__traceback__) from None


async def await_agent(awaitable: Awaitable[_T]) -> _T:
    """``await awaitable`` (agent code); whatever it raises is the agent's, as
    :class:`AgentRaised`, except ATP's own cancellation of the run."""
    try:
        return await awaitable
    except BaseException as exc:
        if cancelled_by_atp(exc):
            raise
        raise AgentRaised(exc).with_traceback(exc.__traceback__) from None
