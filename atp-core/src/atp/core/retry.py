"""Retries of runs that met a fault of the infrastructure, never of an agent's failure.

A run is tried again when its adapter raised a retryable :class:`~atp.core.errors.AdapterError`
(the agent could not be reached, answered HTTP 429/502/503/504, its container could not start,
the cluster worker running it died) or a plain ``ConnectionRefusedError``. An agent that
answered wrongly, crashed or timed out is not: that is what a test is for. The wait before the
next attempt is what the agent asked (``Retry-After``), else an exponential backoff with
jitter: ``base * 2**(attempt-1)``, at most :data:`MAX_BACKOFF_SECONDS`, of which a random half
is waited on top of the other half, so that runs failing together do not come back together.
"""

from __future__ import annotations

import random
from typing import NamedTuple

from atp.core.errors import AdapterError

DEFAULT_BACKOFF_SECONDS = 1.0
"""The wait before the second attempt (about; then doubling)."""
MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 120.0
"""The longest wait an agent's ``Retry-After`` gets."""
MAX_RETRIES = 100


class Fault(NamedTuple):
    """A fault of the infrastructure: why, and how long the far side asked ATP to wait."""

    reason: str
    retry_after: float | None = None


def infrastructure_fault(exc: BaseException) -> Fault | None:
    """The fault ``exc`` is, when another attempt may get past it; ``None`` otherwise."""
    if isinstance(exc, AdapterError):
        return Fault(str(exc), exc.retry_after) if exc.retryable else None
    if isinstance(exc, ConnectionRefusedError):
        return Fault(f"connection refused: {exc}")
    return None


def backoff(attempt: int, base: float = DEFAULT_BACKOFF_SECONDS, retry_after: float | None = None) -> float:
    """Seconds to wait after attempt number ``attempt`` (1 for the first) met a fault."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, MAX_RETRY_AFTER_SECONDS)
    delay: float = min(MAX_BACKOFF_SECONDS, base * 2.0 ** min(attempt - 1, 30))
    return delay / 2 + random.uniform(0, delay / 2)
