"""Files of a run directory opened so that nothing put in their place can stall or fool ATP.

An agent runs as the same user as ATP and may write anywhere ATP can, including into the run
directory: a FIFO where ATP will open the run's log blocks a plain ``open`` forever, a symbolic
link sends ATP's writes elsewhere, ``/dev/zero`` linked as ``results.jsonl`` never ends, and a
log replaced by a link to ``~/.ssh/id_rsa`` would put that file into a report. Every file of a
run directory is opened here without blocking, without following a link when writing, and used
only when it is a regular file; what ATP reads back from a run directory is opened with
:func:`open_inside` (:func:`read_inside`, bounded), which follows no link at all below the
directory. Anything else is an :class:`OSError` saying what it is.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from atp.core.portability import RAW_FLAGS

_NONBLOCK = RAW_FLAGS
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _regular(fd: int, path: Path) -> int:
    """``fd`` when it is a regular file; else it is closed and OSError says what it is."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"it is {kind(mode)}, not a regular file", str(path))
    if hasattr(os, "set_blocking"):  # (Windows before Python 3.12 has none, and no FIFOs either)
        os.set_blocking(fd, True)
    return fd


def _open(path: Path, flags: int, mode: int = 0o644) -> int:
    try:
        fd = os.open(path, flags | _NONBLOCK | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and flags & _NOFOLLOW:
            raise OSError(errno.ELOOP, "it is a symbolic link, not a regular file", str(path)) from None
        if exc.errno == errno.ENXIO:  # a FIFO no process reads, a device without its driver
            try:
                what = kind(os.stat(path).st_mode)
            except OSError:
                raise exc from None
            raise OSError(errno.ENXIO, f"it is {what}, not a regular file", str(path)) from None
        raise
    return _regular(fd, path)


def open_append(path: Path) -> int:
    """A descriptor appending to ``path`` (created when missing)."""
    return _open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW)


def open_new(path: Path) -> int:
    """A descriptor writing ``path`` from its start (created, or emptied)."""
    return _open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW)


def write_new(path: Path, data: bytes) -> None:
    """``path`` holding ``data`` (created, or replaced in place)."""
    fd = open_new(path)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | bytearray, *, durable: bool = False) -> None:
    """``path`` holding ``data`` whole or not at all: written to a temporary file of a unique
    name beside it, then renamed over it, so that a reader never sees half a file, two writers
    never share a temporary file and a failure leaves the old file (and no temporary one). A link
    at ``path`` is replaced, not followed. With ``durable``, the data reach the disk before the
    rename. The file keeps the permissions of the one it replaces (a new one gets 0644).
    Raises :class:`OSError` (:func:`reason` words it)."""
    import tempfile

    try:
        mode = stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)
    except OSError:
        mode = 0o644  # a new file: as ATP writes every other (mkstemp's own is 0600)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            else:  # Windows before Python 3.13: only the read-only bit, by path
                os.chmod(temporary, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def open_read(path: Path) -> BinaryIO:
    """``path`` open for reading (a link is followed, to a regular file only)."""
    return os.fdopen(_open(path, os.O_RDONLY), "rb")


def read_bytes(path: Path) -> bytes:
    with open_read(path) as handle:
        return handle.read()


def _parts(relative: str | PurePosixPath, path: Path) -> tuple[str, ...]:
    """The parts of a path inside a directory: relative, without ``..``; else OSError."""
    text = str(relative)
    parts = PurePosixPath(text).parts
    if not parts or text.startswith("/") or "\0" in text or any(p in ("..", ".") for p in parts):
        raise OSError(errno.EACCES, "it is not a path inside the run directory", str(path))
    return parts


def _folder(fd: int, part: str, path: Path) -> int:
    """The folder ``part`` of the folder open as ``fd``, opened without following a link."""
    try:
        return os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
    except OSError as exc:
        try:
            link = stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
        except OSError:
            link = False
        if link:
            raise OSError(errno.ELOOP, f"its folder {part} is a symbolic link", str(path)) from None
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def open_inside(directory: Path, relative: str | PurePosixPath) -> BinaryIO:
    """``directory/relative`` open for reading, when it is a regular file inside ``directory``:
    ``relative`` must be relative and without ``..``, and no part of it may be a symbolic link
    (each folder is opened without following one, then the file, without blocking), so that
    nothing an agent puts in the directory sends ATP's reading elsewhere. ``directory`` itself
    is the caller's choice and is followed. Anything else is an :class:`OSError` saying why."""
    path = directory / str(relative)
    parts = _parts(relative, path)
    if os.open not in os.supports_dir_fd:  # pragma: no cover - every POSIX system ATP runs on
        for end in range(1, len(parts)):
            if os.path.islink(directory.joinpath(*parts[:end])):
                raise OSError(errno.ELOOP, f"its folder {parts[end - 1]} is a symbolic link", str(path))
        return os.fdopen(_open(path, os.O_RDONLY | _NOFOLLOW), "rb")
    fd = os.open(directory, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = _folder(fd, part, path)
            os.close(fd)
            fd = inner
        try:
            found = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OSError(errno.ELOOP, "it is a symbolic link, not a regular file", str(path)) from None
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)
    return os.fdopen(_regular(found, path), "rb")


def read_inside(
    directory: Path, relative: str | PurePosixPath, limit: int, *, end: bool = False
) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of ``directory/relative``, opened as :func:`open_inside` opens
    it: its first ``limit`` bytes (with ``end``, its last), and whether it held more."""
    with open_inside(directory, relative) as handle:
        if end:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                handle.seek(size - limit)
            return handle.read(limit), size > limit
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit


def lines(handle: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of ``handle`` (each with its newline; the last may lack it), each read only
    when it holds at most ``limit`` bytes besides its newline: a longer line is read past, a
    piece at a time, and given as ``None``."""
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = handle.readline(1 << 20)
        yield None


def reason(exc: OSError) -> str:
    """An OSError's reason without its file name (which messages give themselves)."""
    return exc.strerror or str(exc)
