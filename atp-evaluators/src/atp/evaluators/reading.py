"""Reading the file an artifact names, so that nothing an agent put there can stall ATP: a
regular file only (never a FIFO, a device or a directory), only where the agent may put it
(:func:`~atp.evaluators.paths.resolve`), at most :data:`MAX_READ_BYTES` of it. Blocking: the
evaluators call :func:`read_file` on a worker thread."""

import os
import stat
from collections.abc import Callable
from typing import NamedTuple

from atp.core.evaluator import EvalContext
from atp.core.text import shorten
from atp.evaluators.paths import resolve

MAX_READ_BYTES = 16 * 1024 * 1024
"""A file artifact is read up to this many bytes; the rest of a larger file is not looked at."""


class Content(NamedTuple):
    """What :func:`~atp.evaluators.artifact.text_of` found."""

    text: str | None
    """The artifact's content as text; ``None`` when ATP has none to look at."""
    note: str | None = None
    """Why there is no text; or, with text, that only the first part of a larger file was read."""


_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _not_regular(shown: str, mode: int) -> Content:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return Content(None, f"{shown} is {kind}, not a regular file; ATP reads only regular files")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open file ``fd``, read in chunks of 1 MiB at most."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_file(path: str, ctx: EvalContext) -> Content:
    """A file artifact's content, read from the file (blocking: runs on a worker thread).

    Only a regular file is read. Its type is checked before opening (a device is never
    opened) and again on the open descriptor (the path may have changed in between); the
    open does not wait for a FIFO's writer (``O_NONBLOCK``) nor follow a last symbolic link
    put in place of a checked path inside a workspace.
    """
    shown = shorten(path, masker=ctx.masker)
    where, problem = resolve(path, ctx)
    if where is None:
        return Content(None, problem)
    follow = ctx.workspace is None
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        before = os.stat(where, follow_symlinks=follow)
        if not stat.S_ISREG(before.st_mode):
            return _not_regular(shown, before.st_mode)
        fd = os.open(where, flags)
    except OSError as exc:
        return Content(None, f"{shown} cannot be read: {exc.strerror or exc}")
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return _not_regular(shown, opened.st_mode)
        data = _read_at_most(fd, MAX_READ_BYTES + 1)
    except OSError as exc:
        return Content(None, f"{shown} cannot be read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    note = None
    if len(data) > MAX_READ_BYTES:
        data = data[:MAX_READ_BYTES]
        cap = _mib(MAX_READ_BYTES)
        note = f"{shown} is larger than {cap}; ATP read only its first {cap}"
    return Content(data.decode("utf-8", "replace"), note)
