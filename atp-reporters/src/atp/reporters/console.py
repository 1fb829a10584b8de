"""The ``console`` reporter: results for a person at a terminal (the default output).

One line per test (✓/✗, score, time, how many runs passed) with its failures under it, and a
summary ``X passed, Y failed, Z skipped``. A failure seen in several runs of a test is shown
once, with the runs it happened in; when the agent itself failed (crashed, timed out, gave no
response), the checks that failed only because it produced no artifacts are folded into one
line. ``--verbose`` adds every check, warnings, score breakdowns and, for each run that did not
pass, the agent's response (status, every artifact with a preview) and the end of its log.
Colour only on a terminal, never with ``NO_COLOR`` set.

During a live ``atp test`` the header is printed before the first run starts. On a terminal a
status line (runs done, in progress, failed, elapsed time) is rewritten in place, refreshed
about once a second by a daemon thread; without a terminal (a CI log) a line is printed as each
test finishes. ``atp report`` prints the whole report, header included.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import msgspec

from atp.core.hookspecs import hookimpl
from atp.core.protocol import Artifact, FileArtifact, StructuredArtifact
from atp.core.reporter import Reporter, ReportOptions
from atp.core.results import Check, RunHeader, RunResult, RunStore, SuiteResults, TestResult
from atp.core.text import printable as safe
from atp.core.text import shorten

_COLORS = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}
_TEST_COLORS = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}

PREVIEW_CHARS = 300
"""An artifact's content is previewed up to this many characters ..."""
PREVIEW_LINES = 5
"""... and this many lines (``--verbose``)."""
MAX_ARTIFACTS_SHOWN = 10
"""Artifacts of one run listed by ``--verbose``; the rest are counted."""
TICK_SECONDS = 1.0
"""How often the status line is redrawn while no run starts or finishes."""
REPORT_LINES_PER_WRITE = 1000
"""The report is written this many lines at a time (a suite of 10,000 tests is not first built
as one string)."""

# How evaluators say there was nothing to check: ATP's own ("the agent produced no
# artifacts") and the usual wording of others ("no artifact 'report.md'").
_NO_ARTIFACTS = re.compile(r"\bno artifacts?\b", re.IGNORECASE)

_STATUS_PHRASE = {"timeout": "timed out", "cancelled": "was cancelled", "partial": "stopped part way"}


def use_color(stream: TextIO, forced: bool | None = None) -> bool:
    if forced is not None:
        return forced
    if os.environ.get("NO_COLOR"):
        return False
    return _isatty(stream)


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def _can_encode(stream: TextIO, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def shown_path(path: Path) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def seconds(value: float) -> str:
    if value < 10:
        return f"{value:.2f}s"
    if value < 120:
        return f"{value:.1f}s"
    return f"{int(value // 60)}m{value % 60:04.1f}s"


def clock(value: float) -> str:
    """Whole seconds, for a time that ticks: ``7s``, ``2m05s``, ``1h02m05s``."""
    whole = max(int(value), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 error``, ``2 errors``."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def which_runs(numbers: Sequence[int]) -> str:
    """``run 2``, ``runs 1,3``, ``runs 1-4,7``."""
    if len(numbers) == 1:
        return f"run {numbers[0]}"
    spans: list[str] = []
    ordered = sorted(set(numbers))
    start = previous = ordered[0]
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        if previous - start >= 2:
            spans.append(f"{start}-{previous}")
        else:
            spans.extend(str(n) for n in range(start, previous + 1))
        if number is not None:
            start = previous = number
    return f"runs {','.join(spans)}"


def preview(text: str) -> list[str]:
    """The first lines of an artifact's text, at most :data:`PREVIEW_LINES` lines and about
    :data:`PREVIEW_CHARS` characters, with how much was left out; each line printable."""
    text = text.rstrip("\n")
    cut = shorten(text, PREVIEW_CHARS)
    lines = cut.split("\n")
    if len(lines) > PREVIEW_LINES:
        kept = "\n".join(lines[:PREVIEW_LINES])
        lines = f"{kept}… ({len(text) - len(kept)} more characters)".split("\n")
    return [safe(line) for line in lines]


def agent_failed(run: RunResult) -> bool:
    """The agent itself failed: it crashed, timed out, gave no response or reported a failure."""
    return bool(run.error) and run.status != "completed"


def follow_on_checks(run: RunResult) -> list[Check]:
    """The failed checks of a run whose agent failed that failed only because it produced no
    artifacts (nothing to check): what the agent's error already explains."""
    if not agent_failed(run) or run.artifacts:
        return []
    return [c for c in run.checks if not c.passed and _nothing_to_check(c)]


def _nothing_to_check(item: Check) -> bool:
    """The check says it found no artifacts: in its details (``produced: []``) or its message."""
    details = item.details if isinstance(item.details, dict) else {}
    return details.get("produced") == [] or bool(_NO_ARTIFACTS.search(item.message))


class StatusLine:
    """The live status line on a terminal: runs done of all, in progress, failed, elapsed.

    Rewritten in place (``\\r`` and erase-line) when a run starts or finishes, and about once a
    second by a daemon thread so that the elapsed time ticks while nothing finishes. Every write
    happens under one lock and only while the line is open: after :meth:`close` (which erases
    it) nothing is written again, and a failing stream closes it quietly.
    """

    def __init__(self, stream: TextIO, paint: Callable[[str], str], total: int) -> None:
        self.stream = stream
        self.paint = paint
        self.total = total
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
        return (
            f"running: {self.done}/{self.total} runs done, {self.running} in progress, "
            f"{self.failed} failed, {elapsed} elapsed"
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


class ConsoleReporter(Reporter):
    name = "console"
    summary = "results in the terminal: a line per test, failures with their evidence, a summary (the default)"

    def __init__(self, options: ReportOptions) -> None:
        super().__init__(options)
        self.stream = options.stream
        self.color = use_color(self.stream, options.color)
        fancy = _can_encode(self.stream, "✓✗σ…")
        self.symbols = {
            "passed": "✓" if fancy else "PASS",
            "failed": "✗" if fancy else "FAIL",
            "error": "!" if fancy else "ERROR",
            "skipped": "-" if fancy else "SKIP",
        }
        self.sigma = "σ" if fancy else "sd"
        self.status: StatusLine | None = None
        self._header_shown: Path | None = None
        """The run directory whose header the live run printed (not printed again)."""
        self._width = 0
        self._lines_shown = False
        self._progress_off = False

    def paint(self, text: str, color: str) -> str:
        if not self.color:
            return text
        return f"\033[{_COLORS[color]}m{text}\033[0m"

    @property
    def live(self) -> bool:
        """The stream is a terminal: progress is a status line rewritten in place."""
        return _isatty(self.stream)

    # --- progress while running (lifecycle hooks: cheap, never raising) -----------------------

    @hookimpl
    def atp_suite_started(self, header: RunHeader, directory: Path) -> None:
        try:
            planned = [t for t in header.tests if t.skip is None]
            self._width = max((len(safe(t.id)) for t in header.tests), default=0)
            runs = {t.runs for t in planned}
            lines = self._header(header.suite, header.agent, header.agent_type, runs, directory)
            live = self.live
            total = sum(t.runs for t in planned)
            if not live and planned:
                lines.append(f"Running {plural(len(planned), 'test')} ({plural(total, 'run')}):")
            self._write("\n".join(lines) + "\n")
            if self._progress_off:  # the stream failed: the report prints everything
                return
            self._header_shown = directory
            self._lines_shown = not live and bool(planned)
            if live:
                self.status = StatusLine(self.stream, lambda text: self.paint(text, "dim"), total)
                self.status.start()
        except Exception:
            self._stop_progress()

    @hookimpl
    def atp_run_started(self) -> None:
        try:
            if self.status is not None:
                self.status.run_started()
        except Exception:
            self._stop_progress()

    @hookimpl
    def atp_run_finished(self, result: RunResult) -> None:
        try:
            if self.status is not None:
                self.status.run_finished(result.outcome == "passed")
        except Exception:
            self._stop_progress()

    @hookimpl
    def atp_test_finished(self, result: TestResult) -> None:
        try:
            if self.status is None and self._lines_shown and not self._progress_off:
                self._write(self._test_line(result, self._width) + "\n")
        except Exception:
            self._stop_progress()

    @hookimpl
    def atp_suite_finished(self) -> None:
        self._stop_progress()

    def _write(self, text: str) -> None:
        if self._progress_off:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._progress_off = True

    def _stop_progress(self) -> None:
        """No more progress output: the status line is stopped and erased."""
        self._progress_off = True
        status = self.status
        if status is not None:
            with contextlib.suppress(Exception):
                status.close()

    def erase_status(self) -> None:
        """Erase the status line for a moment (a warning is printed); it is drawn again."""
        status = self.status
        if status is not None:
            with contextlib.suppress(Exception):
                status.erase()

    def clear_progress(self) -> None:
        """Erase the status line and stop refreshing it (before anything else is printed)."""
        self._stop_progress()

    # --- the report --------------------------------------------------------------------------

    def _header(self, suite: str, agent: str, agent_type: str, runs: set[int], directory: Path) -> list[str]:
        out = [self.paint("ATP Test Results", "bold"), "================", ""]
        out.append(f"Suite: {safe(suite)}")
        out.append(f"Agent: {safe(agent)} ({safe(agent_type)})")
        if runs:
            out.append(f"Runs per test: {', '.join(str(r) for r in sorted(runs))}")
        out.append(f"Run directory: {safe(shown_path(directory))}")
        out.append("")
        return out

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self._stop_progress()
        out: list[str] = []
        if self._header_shown is not None and self._header_shown == store.directory:
            if self._lines_shown:
                out.append("")
        else:
            runs = {t.planned_runs for t in results.tests if t.skip_reason is None}
            out.extend(self._header(results.suite, results.agent, results.agent_type, runs, store.directory))
        out.append("Tests:")
        width = max((len(safe(t.id)) for t in results.tests), default=0)
        for test in results.tests:
            out.extend(self._test(test, width))
            if len(out) >= REPORT_LINES_PER_WRITE:
                self.stream.write("\n".join(out) + "\n")
                out = []
        out.append("")
        for problem in results.problems:
            out.append(self.paint(f"Problem: {safe(problem)}", "red"))
        out.append(self._summary(results))
        out.append(f"Total time: {seconds(results.duration_seconds)}")
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def _test_line(self, test: TestResult, width: int) -> str:
        mark = self.paint(self.symbols[test.status], _TEST_COLORS[test.status])
        test_id = safe(test.id).ljust(width)
        if test.status == "skipped":
            return f"  {mark} {test_id}  skipped: {safe(test.skip_reason or '')}"
        ran = len(test.runs)
        time_part = f"time {seconds(test.duration_seconds)}"
        line = f"  {mark} {test_id}  {test.score:5.1f}/100  "
        if ran <= 1 and test.planned_runs <= 1:
            return line + time_part
        passed = sum(r.outcome == "passed" for r in test.runs)
        runs_part = f"{passed}/{plural(ran, 'run')} passed"
        if ran > 1:
            runs_part += f", {self.sigma}={statistics.stdev(r.score for r in test.runs):.1f}"
        if ran < test.planned_runs:
            runs_part += self.paint(f", {test.planned_runs - ran} not run", "yellow")
        return f"{line}{time_part:<10}  {runs_part}"

    def _test(self, test: TestResult, width: int) -> list[str]:
        lines = [self._test_line(test, width)]
        if test.status == "skipped":
            return lines
        if self.options.verbose:
            many = len(test.runs) > 1
            for run in test.runs:
                lines.extend(self._run_verbose(run, f"run {run.run_number}: " if many else ""))
        else:
            lines.extend(self._failures(test))
        return lines

    # --- failures, folded and grouped (the default) ---

    def _run_failures(self, run: RunResult) -> list[tuple[tuple[str, ...], str]]:
        """What went wrong in one run, each with a key that is equal for the same failure in
        another run: the agent's error first, then the checks (follow-ons folded)."""
        items: list[tuple[tuple[str, ...], str]] = []
        if run.outcome == "passed":
            return items
        if run.error:
            items.append((("error", run.status, run.error), f"{safe(run.status)}: {safe(run.error)}"))
        failed = run.failed_checks
        follow_on = follow_on_checks(run)
        if len(follow_on) > 1:
            names = ", ".join(c.name for c in follow_on)
            text = (
                f"{plural(len(follow_on), 'check')} not met: the agent {_STATUS_PHRASE.get(run.status, 'failed')} "
                f"and produced no artifacts ({safe(shorten(names, PREVIEW_CHARS))})"
            )
            items.append((("folded", run.status, names), text))
            folded = {id(c) for c in follow_on}
            failed = [c for c in failed if id(c) not in folded]
        for item in failed:
            items.append((("check", item.name, item.message), f"{safe(item.name)}: {safe(item.message)}"))
        return items

    def _failures(self, test: TestResult) -> list[str]:
        """Each distinct failure of a test once, with the runs it happened in when it has several."""
        groups: dict[tuple[str, ...], tuple[str, list[int]]] = {}
        for run in test.runs:
            for key, text in self._run_failures(run):
                groups.setdefault(key, (text, []))[1].append(run.run_number)
        many = len(test.runs) > 1
        lines = []
        for text, numbers in groups.values():
            prefix = f"{which_runs(numbers)}: " if many else ""
            lines.append(self.paint(f"    - {prefix}{text}", "red"))
        return lines

    # --- everything about each run (--verbose) ---

    def _run_verbose(self, run: RunResult, prefix: str) -> list[str]:
        lines: list[str] = []
        if run.error:
            color = "yellow" if run.outcome == "passed" else "red"
            lines.append(self.paint(f"    - {prefix}{safe(run.status)}: {safe(run.error)}", color))
        for item in run.checks:
            mark = self.symbols["passed" if item.passed else "failed"]
            text = f"    {mark} {prefix}{safe(item.name)}: {safe(item.message)}"
            if item.score not in (0.0, 1.0):
                text += f" (score {item.score:.2f})"
            lines.append(self.paint(text, "dim" if item.passed else "red"))
        for warning in run.warnings:
            lines.append(self.paint(f"    ! {prefix}warning: {safe(warning)}", "yellow"))
        if run.score_breakdown:
            parts = ", ".join(f"{safe(k)} {v:.2f}" for k, v in run.score_breakdown.items())
            lines.append(self.paint(f"    {prefix}score {run.score:.1f}: {parts}", "dim"))
        if run.outcome != "passed":
            lines.extend(self._response(run, prefix))
        if run.log_tail:
            lines.append(self.paint(f"    {prefix}agent log (last {plural(len(run.log_tail), 'line')}):", "dim"))
            lines.extend(self.paint(f"      | {safe(line)}", "dim") for line in run.log_tail)
        return lines

    def _response(self, run: RunResult, prefix: str) -> list[str]:
        """The response of a run that did not pass: its status and every artifact, previewed."""
        count = len(run.artifacts)
        listing = plural(count, "artifact") if count else "no artifacts"
        lines = [f"    {prefix}response: status {safe(run.status)}, {listing}{':' if count else ''}"]
        for artifact in run.artifacts[:MAX_ARTIFACTS_SHOWN]:
            label, about, text = _describe(artifact)
            lines.append(f"      {label} ({about})")
            if text is not None:
                lines.extend(f"        | {line}" for line in preview(text))
        if count > MAX_ARTIFACTS_SHOWN:
            lines.append(f"      … and {plural(count - MAX_ARTIFACTS_SHOWN, 'more artifact')}")
        return [self.paint(line, "dim") for line in lines]

    def _summary(self, results: SuiteResults) -> str:
        s = results.summary
        parts = [
            self.paint(f"{s.passed} passed", "green") if s.passed else f"{s.passed} passed",
            self.paint(f"{s.failed} failed", "red") if s.failed else f"{s.failed} failed",
            f"{s.skipped} skipped",
        ]
        if s.errors:
            parts.append(self.paint(plural(s.errors, "error"), "red"))
        ran = s.total - s.skipped
        rate = f" ({100.0 * s.passed / ran:.1f}%)" if ran else ""
        extra = []
        if s.deselected:
            extra.append(f"{s.deselected} deselected")
        if results.interrupted:
            extra.append(self.paint("interrupted", "yellow"))
        if results.problems:
            extra.append(self.paint(f"{plural(len(results.problems), 'problem')} with the run directory", "red"))
        tail = f"; {', '.join(extra)}" if extra else ""
        return f"Summary: {', '.join(parts)}{rate}{tail}"


def _describe(artifact: Artifact) -> tuple[str, str, str | None]:
    """An artifact's label, what it is (type, content type, size) and its text to preview."""
    if isinstance(artifact, StructuredArtifact):
        data = msgspec.json.encode(artifact.data).decode("utf-8", "replace")
        return safe(shorten(artifact.name)), f"structured, {plural(len(data), 'char')} of JSON", data
    about = ["file" if isinstance(artifact, FileArtifact) else "reference"]
    if artifact.content_type:
        about.append(safe(shorten(artifact.content_type, 80)))
    content = artifact.content if isinstance(artifact, FileArtifact) else None
    if content is not None:
        about.append(plural(len(content), "char"))
    elif artifact.size_bytes is not None:
        about.append(plural(artifact.size_bytes, "byte"))
    if isinstance(artifact, FileArtifact) and content is None:
        about.append("no content sent")
    return safe(shorten(artifact.path)), ", ".join(about), content
