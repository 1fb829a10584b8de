"""The live status line of a run on a terminal: runs done of all, in progress, failed, elapsed.

Drawn by the console reporter while ``atp test`` runs (without a terminal, a line per finished
test is printed instead).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import TextIO

from atp.reporters.terminal.words import clock

TICK_SECONDS = 1.0
"""How often the status line is redrawn while no run starts or finishes."""


class StatusLine:
    """The live status line on a terminal: runs done of all, in progress, failed, elapsed.

    Rewritten in place (``\\r`` and erase-line) when a run starts or finishes, and about once a
    second by a daemon thread so that the elapsed time ticks while nothing finishes. Every write
    happens under one lock and only while the line is open: after :meth:`close` (which erases
    it) nothing is written again, and a failing stream closes it quietly.
    """

    def __init__(self, stream: TextIO, paint: Callable[[str], str], total: int, up_to: bool = False) -> None:
        self.stream = stream
        self.paint = paint
        self.total = total
        self.up_to = up_to
        """``total`` is a most (adaptive run counts): tests may stop sooner."""
        self.done = 0
        self.running = 0
        self.failed = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._closed = False
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._draw()
        atexit.register(self.close)  # ATP stopped without finishing the suite: erase the line
        self._thread = threading.Thread(target=self._tick, name="atp-console-status", daemon=True)
        self._thread.start()

    def text(self) -> str:
        elapsed = clock(time.monotonic() - self.started)
        done = f"{self.done} of at most {self.total}" if self.up_to else f"{self.done}/{self.total}"
        return (
            f"running: {done} runs done, {self.running} in progress, {self.failed} failed, {elapsed} elapsed"
        )

    def run_started(self) -> None:
        with self._lock:
            self.running += 1
        self._draw()

    def run_finished(self, passed: bool) -> None:
        with self._lock:
            self.running = max(self.running - 1, 0)
            self.done += 1
            self.failed += not passed
        self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._draw()

    def _width(self) -> int | None:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a terminal, or closed
            return None
        return columns if columns >= 20 else None  # 0: a terminal that does not say

    def _draw(self) -> None:
        with self._lock:
            if self._closed:
                return
            line = self.text()
            width = self._width()
            if width is not None and len(line) >= width:  # a wrapped line could not be erased
                line = line[: max(width - 1, 0)]
            self._write("\r\033[K" + self.paint(line))
            self._shown = True

    def _write(self, data: str) -> None:
        """Called with the lock held."""
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away, the stream was closed
            self._closed = True

    def erase(self) -> None:
        """Erase the line for now (something else is about to be printed); the next tick
        draws it again below."""
        with self._lock:
            if not self._closed and self._shown:
                self._write("\r\033[K")
            self._shown = False

    def close(self) -> None:
        """Stop the refreshing and erase the line; idempotent, safe from any thread."""
        self._stop.set()
        with self._lock:
            if not self._closed and self._shown:
                self._write("\r\033[K")
            self._closed = True
            self._shown = False
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * TICK_SECONDS)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
