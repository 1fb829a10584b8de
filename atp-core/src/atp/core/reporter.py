"""The reporter interface: turn finished results into something a person or a CI system reads.

A reporter renders :class:`~atp.core.results.SuiteResults` read from a run directory, so a live
``atp test`` and a later ``atp report`` render the same thing. A reporter that wants to show
progress while tests run implements lifecycle hooks (``atp_run_finished`` and so on) as methods
marked with :data:`~atp.core.hookspecs.hookimpl`; the CLI registers it for the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, TextIO

from atp.core.errors import AtpError
from atp.core.results import RunStore, SuiteResults


class ReportOptions:
    __slots__ = ("color", "output_file", "stream", "verbose")

    def __init__(
        self,
        *,
        output_file: Path | None = None,
        verbose: bool = False,
        stream: TextIO | None = None,
        color: bool | None = None,
    ) -> None:
        self.output_file = output_file
        self.verbose = verbose
        self.stream: TextIO = stream if stream is not None else sys.stdout
        self.color = color


def write_file(target: Path, data: bytes) -> None:
    """Write a report file whole or not at all (through ``<name>.partial``); a failure is an
    :class:`~atp.core.errors.AtpError` naming the file and the reason."""
    if target.exists() and not os.access(target, os.W_OK):
        raise AtpError(f"cannot write {target}: the file is read-only")
    partial = target.with_name(target.name + ".partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        partial.replace(target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise AtpError(f"cannot write {target}: {exc.strerror or exc}") from None


class Reporter(ABC):
    name: ClassVar[str]
    """The name ``--output`` selects."""
    summary: ClassVar[str] = ""
    file_extension: ClassVar[str | None] = None
    """Reporters writing a file have one; a reporter without one writes to the terminal."""

    def __init__(self, options: ReportOptions) -> None:
        self.options = options

    @abstractmethod
    def report(self, results: SuiteResults, store: RunStore) -> None:
        """Render ``results``; ``store`` gives each run's events and log when wanted."""
