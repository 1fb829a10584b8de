"""An exclusive lock on a file, taken without waiting, on every platform ATP runs on.

A run directory's lock (:data:`atp.core.store.LOCK_FILE`) says that an ``atp test`` is writing
it. POSIX systems (Linux, macOS) lock with ``fcntl.flock``; Windows, which has no ``fcntl``,
with ``msvcrt.locking`` on the file's first byte. Either way the lock belongs to the open file
(another open of the same file, in this process or another, does not get it), it is taken or
refused at once, and the system lets it go when the file is closed or its process dies, so a
killed ``atp test`` leaves no stale lock behind.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

__all__ = ["WINDOWS", "Locked", "acquire", "held", "release"]

WINDOWS = sys.platform == "win32"
"""Whether ``msvcrt`` locks (Windows) rather than ``fcntl`` (POSIX); read at each call."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class Locked(Exception):
    """Another open file holds the lock (another process is writing)."""


def _lock(fd: int, exclusive: bool) -> None:
    """Lock the open file ``fd`` without waiting; :class:`OSError` when another holds it."""
    if WINDOWS:
        msvcrt = importlib.import_module("msvcrt")
        os.lseek(fd, 0, os.SEEK_SET)  # (msvcrt locks bytes from the file's position on)
        msvcrt.locking(fd, msvcrt.LK_NBLCK if exclusive else msvcrt.LK_NBRLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)


def _unlock(fd: int) -> None:
    if WINDOWS:
        msvcrt = importlib.import_module("msvcrt")
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


def acquire(path: Path) -> int:
    """``path`` (created when missing, mode 0644) opened and locked exclusively, without
    waiting: its file descriptor, to hand to :func:`release`. Raises :class:`Locked` when
    another open file holds the lock, :class:`OSError` when ``path`` cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o644)
    try:
        _lock(fd, exclusive=True)
    except OSError:
        os.close(fd)
        raise Locked(str(path)) from None
    return fd


def release(fd: int) -> None:
    """Let the lock :func:`acquire` took go, and close its file."""
    try:
        _unlock(fd)
    except OSError:
        pass  # (closing the file lets it go anyway)
    finally:
        os.close(fd)


def held(path: Path) -> bool:
    """Whether another open file holds the lock on ``path``, found without waiting and without
    creating ``path`` (a missing or unreadable file is not held)."""
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    except OSError:
        return False
    try:
        try:
            _lock(fd, exclusive=False)
        except OSError:
            return True
        try:
            _unlock(fd)
        except OSError:
            pass
        return False
    finally:
        os.close(fd)
