"""The reporter interface: turn finished results into something a person or a CI system reads.

A reporter renders :class:`~atp.core.results.SuiteResults` read from a run directory, so a live
``atp test`` and a later ``atp report`` render the same thing. A reporter that wants to show
progress while tests run implements lifecycle hooks (``atp_run_finished`` and so on) as methods
marked with :data:`~atp.core.hookspecs.hookimpl`; the CLI registers it for the run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, TextIO

from atp.core.errors import AtpError
from atp.core.portability import RAW_FLAGS
from atp.core.results import RunStore, SuiteResults


class ReportOptions:
    """How the command line asks a reporter to render: ``output_file`` (``None``: write to
    ``stream``, standard output by default), ``verbose`` (``--verbose``: more detail),
    ``quiet`` (see below), ``color`` (``None``: decide from the stream and ``NO_COLOR``) and
    ``config`` (which configuration the command used, in a few words, for a header; ``None``
    when it does not say)."""

    __slots__ = ("color", "config", "output_file", "quiet", "stream", "verbose")

    def __init__(
        self,
        *,
        output_file: Path | None = None,
        verbose: bool = False,
        quiet: bool = False,
        stream: TextIO | None = None,
        color: bool | None = None,
        config: str | None = None,
    ) -> None:
        self.output_file = output_file
        self.config = config
        self.verbose = verbose
        self.quiet = quiet
        """Say as little as is useful (``--quiet``): for a terminal report, only what did not
        pass and the summary; a file's content does not change."""
        self.stream: TextIO = stream if stream is not None else sys.stdout
        self.color = color


_OPEN_FILES = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/")
"""Names of a file the process has open (its standard output, ...): whatever that file is,
a report is added to it, never written in its place."""


def write_file(target: Path, data: bytes | bytearray) -> None:
    """Write a report file whole or not at all (through ``<name>.partial`` beside it); a link
    is followed (the file it names is written, the link stays), and a device or FIFO
    (``/dev/null``) is written into as it is. A name of a file the process has open
    (``/dev/stdout``, ``/dev/fd/N``) is appended to, even when it is a regular file (standard
    output redirected to a log: what is in it stays). A failure is an
    :class:`~atp.core.errors.AtpError` naming the file and the reason."""
    if str(target).startswith(_OPEN_FILES):
        _write_into(target, data, append=True)
        return
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise AtpError(f"cannot write {target}: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise AtpError(f"cannot write {target}: it is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        _write_into(target, data)
        return
    real = Path(os.path.realpath(target))
    if mode is not None and not os.access(real, os.W_OK):
        raise AtpError(f"cannot write {target}: the file is read-only")
    partial = real.with_name(real.name + ".partial")
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        partial.replace(real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise AtpError(f"cannot write {target}: {exc.strerror or exc}") from None


def _write_into(target: Path, data: bytes | bytearray, append: bool = False) -> None:
    """Write into a file that is not a regular one (a device, a FIFO) as it is; with
    ``append``, at the end of whatever it is."""
    flags = os.O_WRONLY | RAW_FLAGS | (os.O_APPEND if append else 0)
    try:
        fd = os.open(target, flags)  # a FIFO nobody reads: ENXIO, at once
    except OSError as exc:
        why = "it is a FIFO no process reads" if exc.errno == errno.ENXIO else exc.strerror or str(exc)
        raise AtpError(f"cannot write {target}: {why}") from None
    try:
        if hasattr(os, "set_blocking"):  # (Windows before Python 3.12: none, and no FIFOs)
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise AtpError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


class Reporter(ABC):
    """Renders finished results: subclass it, set :attr:`name` (and :attr:`file_extension` for
    a file), implement :meth:`report`, and register the class through ``atp_register_reporters``.

    The command line makes one per ``--output`` with the :class:`ReportOptions` asked for and
    calls :meth:`report` once the suite is over, with what the run directory holds (``atp
    report`` does the same later). An :class:`~atp.core.errors.AtpError` it raises (a file it
    cannot write) is shown as it is, anything else as a failure of its plugin; either way the
    other reporters still write, and ``atp`` exits with an error. Progress while tests run
    comes from lifecycle hooks implemented on the instance (see the module)."""

    name: ClassVar[str]
    """The name ``--output`` selects."""
    summary: ClassVar[str] = ""
    """One line saying what it renders."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same output name this class replaces on
    purpose. Without it, two plugins registering one output name is an error naming both."""
    file_extension: ClassVar[str | None] = None
    """Reporters writing a file have one; a reporter without one writes to the terminal."""

    def __init__(self, options: ReportOptions) -> None:
        self.options = options

    @abstractmethod
    def report(self, results: SuiteResults, store: RunStore) -> None:
        """Render ``results``; ``store`` gives each run's events and log when wanted."""

    def write_output(self, data: bytes | bytearray) -> None:
        """Write a file-writing reporter's whole document: to ``options.output_file`` (whole or
        not at all, :func:`write_file`), or to ``options.stream`` when there is none (as bytes
        when the stream has a binary buffer, so nothing is re-encoded)."""
        target = self.options.output_file
        if target is not None:
            write_file(target, data)
            return
        stream = self.options.stream
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            stream.flush()
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(bytes(data).decode())
            stream.flush()
