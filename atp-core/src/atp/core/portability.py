"""What ATP does on a system that lacks something it uses on Linux, and the one warning it gives.

ATP is built and tested on Linux; macOS and Windows lack some of what it uses there (process
groups, ``SIGKILL``, ``/proc``, pidfds, namespaces). Code that uses such a thing asks here first
and, where it is missing, does the next best thing (signals the process alone instead of its
group, say) and calls :func:`lacking`, which warns once per ATP process, naming what is missing
and what ATP does instead, never silently and never by failing the run. docs/platforms.md lists
what each platform lacks.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

__all__ = ["KILL", "RAW_FLAGS", "kill_group", "lacking", "told"]

logger = logging.getLogger("atp.platform")

KILL: int = getattr(signal, "SIGKILL", signal.SIGTERM)
"""``SIGKILL``; ``SIGTERM`` on Windows, which has no SIGKILL (there it ends the process at once,
as ``TerminateProcess``)."""

RAW_FLAGS: int = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""What ``os.open`` is given for a file ATP reads or writes as bytes: ``O_NONBLOCK`` where the
system has FIFOs (one put where ATP opens a file must not stall it), ``O_BINARY`` where it
translates line ends unless told not to (Windows)."""

_told: set[str] = set()


def told() -> frozenset[str]:
    """The features :func:`lacking` has warned about in this process."""
    return frozenset(_told)


def lacking(feature: str, instead: str) -> None:
    """Warn, the first time only in this process, that this system has no ``feature`` and what
    ATP does ``instead``."""
    if feature in _told:
        return
    _told.add(feature)
    logger.warning("this system (%s) has no %s: %s", sys.platform, feature, instead)


def kill_group(pid: int, sig: int) -> bool:
    """Send ``sig`` to the process group ``pid`` (raising what ``os.killpg`` raises); ``False``,
    after the warning of :func:`lacking`, on a system without process groups, where the caller
    signals the process alone."""
    killpg = getattr(os, "killpg", None)
    if killpg is None:
        lacking(
            "process groups (os.killpg)",
            "ATP stops the process it started, but not the processes that one started",
        )
        return False
    killpg(pid, sig)
    return True
