"""The ``console`` reporter: results for a person at a terminal (the default output).

One line per test (✓/✗, score, time) with its failures under it, and a summary ``X passed, Y
failed, Z skipped``. A test of several runs shows its score's spread (``σ=…``, the kernel's
sample standard deviation), how many runs passed when not all did or its pass rule is not
``all`` (with the rule), its stability level when not ``stable``, and for an adaptive run count
how many runs it took and why it stopped. With a baseline, each test's verdict follows its line
and a ``Baseline:`` line the summary; with several runs, the suite's pass@1 and pass^k and its
unstable tests follow it too. Every figure is the kernel's (``TestResult.statistics``,
``TestResult.baseline``, ``SuiteResults.statistics``): none is computed here, and one that is
undefined is shown as ``—`` or left out, never as NaN. A failure seen in several runs of a test is shown
once, with the runs it happened in; when the agent itself failed (crashed, timed out, gave no
response), the checks that failed only because it produced no artifacts are folded into one
line. A test whose runs disagree is marked ``flaky``, one the suite quarantines ``quarantined``
(its failure is shown, and counted apart, but does not fail the run), and one whose runs were
made again after faults of the infrastructure says how many retries; a run that did not pass
lists its retries (the attempt, why, the wait). Under the summary: the flaky tests, the
quarantined ones, the retries, the budget (what was spent of it, and when it stopped the run,
the tests it left out) and the shard these results are of. ``--verbose`` adds, per test, the
score's 95% confidence interval, median, min, max and coefficient of variation, the means of the
score components (and which did not count) and of the metrics, pass@k and pass^k, the 95%
interval of the difference from the baseline; and every check, warnings, score breakdowns and,
for each run that did not pass, the agent's response (status, every artifact with a preview) and
the end of its log; and the retries of every run, passed ones too.
``--quiet`` prints only the tests that did not pass, with their failures, and the summary
lines: no header, no progress. Colour only on a terminal, never with ``NO_COLOR`` set.

During a live ``atp test`` the header is printed before the first run starts. On a terminal a
status line (runs done, in progress, failed, elapsed time) is rewritten in place, refreshed
about once a second by a daemon thread; without a terminal (a CI log) a line is printed as each
test finishes. ``atp report`` prints the whole report, header included.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import msgspec

from atp.core.adaptive import Adaptive
from atp.core.baseline import BaselineComparison, TestComparison
from atp.core.hookspecs import hookimpl
from atp.core.protocol import Artifact, FileArtifact, StructuredArtifact
from atp.core.reporter import Reporter, ReportOptions
from atp.core.results import (
    BUDGET_EXCEEDED,
    METRIC_NAMES,
    Budget,
    Check,
    PassRule,
    RunHeader,
    RunResult,
    RunStore,
    Shard,
    SuiteResults,
    TestResult,
)
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

_STABILITY_COLORS = {"moderate": "dim", "unstable": "yellow", "critical": "red"}
_VERDICTS = {
    "regression": "regression",
    "improvement": "improvement",
    "no_change": "no significant change",
    "not_compared": "not compared",
}
_VERDICT_COLORS = {"regression": "red", "improvement": "green", "no_change": "dim", "not_compared": "dim"}
_METHODS = {
    "welch": "Welch's t-test on the runs' scores",
    "welch-summary": "Welch's t-test from the baseline's summary statistics",
    "sequential": "the adaptive run count's sequential rule",
}
COMPONENTS = ("quality", "completeness", "efficiency", "cost")
_NOT_COUNTED = {
    "quality": "no quality checks",
    "completeness": "no checks",
    "efficiency": "no max_steps, or steps unknown",
    "cost": "no token or cost limit, or usage unknown",
}
"""Why a score component did not count in any run: the conditions under which it counts
(docs/statistics.md), as the reporter cannot tell which of them was missing."""
MAX_IDS_SHOWN = 20
"""Test ids listed on one summary line (unstable tests, tests not in the run); the rest are counted."""
_ASCII = str.maketrans({"±": "+/-", "≤": "<=", "≥": ">=", "—": "-", "σ": "sd", "…": "...", "→": "->"})


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def p_text(value: float | None) -> str:
    """A p-value to two significant figures (``0.003``, ``0.03``, ``1``); ``—`` when undefined."""
    if not finite(value):
        return "—"
    assert value is not None
    return "0" if value == 0.0 else f"{value:.2g}"


def runs_label(runs: int, adaptive: Adaptive | None) -> str:
    """How many runs a test has planned: ``5``, or ``auto (3-20)`` for an adaptive run count."""
    return f"auto ({adaptive.min_runs}-{adaptive.max_runs})" if adaptive is not None else str(runs)


def _labels(planned: set[tuple[int, Adaptive | None]]) -> list[str]:
    ordered = sorted(planned, key=lambda p: (p[1] is not None, p[0], p[1].min_runs if p[1] else 0))
    return list(dict.fromkeys(runs_label(runs, adaptive) for runs, adaptive in ordered))


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


def waited(value: float) -> str:
    """A retry's wait: ``0.5 s``, ``1.25 s``, ``30 s``."""
    return f"{round(value, 2):g} s" if finite(value) else "? s"


def usd(value: float) -> str:
    """Money spent or allowed: ``$0.42``, ``$1.00``; ``$0.0031`` below a cent."""
    return f"${value:.4f}" if 0 < abs(value) < 0.01 else f"${value:.2f}"


def id_list(ids: Sequence[str]) -> str:
    """Test ids (each printable), at most :data:`MAX_IDS_SHOWN` of them, the rest counted."""
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


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


class ConsoleReporter(Reporter):
    name = "console"
    summary = (
        "results in the terminal: a line per test, failures with their evidence, a summary (the default)"
    )

    def __init__(self, options: ReportOptions) -> None:
        super().__init__(options)
        self.stream = options.stream
        self.color = use_color(self.stream, options.color)
        fancy = _can_encode(self.stream, "✓✗σ…±≤≥—")
        self.fancy = fancy
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
        self._holm = True
        """Which verdict counts in :meth:`_verdict`: Holm's, unless the run's correction is ``none``."""

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
        if self.options.quiet:  # no header, no progress: the report says what did not pass
            self._progress_off = True
            return
        try:
            planned = [t for t in header.tests if t.skip is None]
            self._width = max((len(safe(t.id)) for t in header.tests), default=0)
            labels = _labels({(t.runs, t.adaptive) for t in planned})
            lines = self._header(header.suite, header.agent, header.agent_type, labels, directory)
            live = self.live
            total = sum(len(t.run_numbers) if t.run_numbers is not None else t.runs for t in planned)
            up_to = any(t.adaptive is not None for t in planned)
            if not live and planned:
                most = "up to " if up_to else ""
                lines.append(f"Running {plural(len(planned), 'test')} ({most}{plural(total, 'run')}):")
            self._write("\n".join(lines) + "\n")
            if self._progress_off:  # the stream failed: the report prints everything
                return
            self._header_shown = directory
            self._lines_shown = not live and bool(planned)
            if live:
                self.status = StatusLine(self.stream, lambda text: self.paint(text, "dim"), total, up_to)
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

    def _header(self, suite: str, agent: str, agent_type: str, runs: list[str], directory: Path) -> list[str]:
        out = [self.paint("ATP Test Results", "bold"), "================", ""]
        out.append(f"Suite: {safe(suite)}")
        out.append(f"Agent: {safe(agent)} ({safe(agent_type)})")
        if runs:
            out.append(f"Runs per test: {', '.join(runs)}")
        out.append(f"Run directory: {safe(shown_path(directory))}")
        out.append("")
        return out

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self._stop_progress()
        self._holm = results.baseline is None or results.baseline.correction == "holm"
        out: list[str] = []
        if self.options.quiet:
            self._quiet_report(results)
            return
        if self._header_shown is not None and self._header_shown == store.directory:
            if self._lines_shown:
                out.append("")
        else:
            labels = _labels({(t.planned_runs, t.adaptive) for t in results.tests if t.skip_reason is None})
            out.extend(
                self._header(results.suite, results.agent, results.agent_type, labels, store.directory)
            )
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
        out.extend(self._reliability(results))
        out.extend(self._skipped_checks(results))
        out.extend(self._evaluation_usage(results))
        out.extend(self._suite_statistics(results))
        if results.baseline is not None:
            out.extend(self._baseline_summary(results.baseline, results.tests))
        out.append(f"Total time: {seconds(results.duration_seconds)}")
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def _quiet_report(self, results: SuiteResults) -> None:
        """``--quiet``: the tests that did not pass with their failures, then the summary."""
        shown = [t for t in results.tests if t.status in ("failed", "error")]
        width = max((len(safe(t.id)) for t in shown), default=0)
        out: list[str] = []
        for test in shown:
            out.extend(self._test(test, width))
        if shown:
            out.append("")
        for problem in results.problems:
            out.append(self.paint(f"Problem: {safe(problem)}", "red"))
        out.append(f"{self._summary(results)} in {seconds(results.duration_seconds)}")
        out.extend(self._reliability(results))
        out.extend(self._skipped_checks(results))
        if results.baseline is not None:
            out.extend(self._baseline_summary(results.baseline, results.tests))
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def text(self, text: str) -> str:
        """ATP's own wording for this stream: ``±``, ``≤``, ``σ``, ``—`` spelt in ASCII when
        the stream cannot encode them."""
        return text if self.fancy else text.translate(_ASCII)

    def number(self, value: float | None, spec: str = ".1f") -> str:
        """A figure, or ``—`` when it is undefined (``None``; never NaN)."""
        if not finite(value):
            return self.text("—")
        return format(value, spec)

    def interval(self, bounds: tuple[float, float] | None, spec: str = ".1f") -> str:
        if bounds is None:
            return self.text("—")
        return f"[{self.number(bounds[0], spec)}, {self.number(bounds[1], spec)}]"

    def rule(self, rule: PassRule) -> str:
        """A pass rule in brief: ``≥80%``, ``mean ≥60``."""
        if rule.rule == "pass_rate":
            return self.text(f"≥{(rule.threshold or 0.0) * 100:g}%")
        if rule.rule == "min_score":
            return self.text(f"mean ≥{rule.threshold or 0.0:g}")
        return "all runs pass"

    def _test_line(self, test: TestResult, width: int) -> str:
        mark = self.paint(self.symbols[test.status], _TEST_COLORS[test.status])
        test_id = safe(test.id).ljust(width)
        if test.status == "skipped":
            return f"  {mark} {test_id}  skipped: {safe(test.skip_reason or '')}"
        ran = len(test.runs)
        time_part = f"time {seconds(test.duration_seconds)}"
        line = f"  {mark} {test_id}  {test.score:5.1f}/100  "
        unmade = len(test.skipped_checks)
        not_made = self.paint(f"{plural(unmade, 'check')} skipped", "yellow") if unmade else ""
        marks = self._marks(test)
        if not_made:
            marks.append(not_made)
        if ran <= 1 and test.planned_runs <= 1 and test.adaptive is None:
            return f"{line}{time_part:<10}  {', '.join(marks)}" if marks else line + time_part
        stats = test.statistics
        std = stats.score.std if stats is not None and ran > 1 else None
        spread = f"({self.sigma}={std:.1f})" if finite(std) else ""
        spread = spread.ljust(len(self.sigma) + 7)  # "(sd=12.3)" at most: the column lines up
        passed = stats.passed_runs if stats is not None else sum(r.outcome == "passed" for r in test.runs)
        decided = test.adaptive is not None and test.stop is not None
        unfinished = ran < test.planned_runs and not decided
        parts = []
        if passed < ran or test.pass_rule.rule != "all" or unfinished:
            runs_part = f"{passed}/{plural(ran, 'run')} passed"
            if test.pass_rule.rule != "all":
                runs_part += f" (rule: {self.rule(test.pass_rule)})"
            parts.append(runs_part)
        if test.adaptive is not None and test.stop is not None:
            parts.append(self._took(test))
        elif test.adaptive is not None and unfinished:
            parts.append(self.paint("not finished: stopped before its rule decided", "yellow"))
        elif unfinished:
            parts.append(self.paint(f"{test.planned_runs - ran} not run", "yellow"))
        level = stats.score.stability if stats is not None and finite(std) else None
        if level is not None and level != "stable":
            parts.append(self.paint(level, _STABILITY_COLORS.get(level, "yellow")))
        parts.extend(marks)
        return f"{line}{spread}  {time_part:<10}  {', '.join(parts)}".rstrip()

    def _marks(self, test: TestResult) -> list[str]:
        """What a test's line says of its reliability: ``flaky`` (its runs disagree),
        ``quarantined`` (a failure does not fail the run) and its retries."""
        marks = []
        if test.flaky:
            marks.append(self.paint("flaky", "yellow"))
        if test.quarantined:
            marks.append(self.paint("quarantined", "yellow"))
        if test.retries:
            marks.append(self.paint(plural(test.retries, "retry", "retries"), "dim"))
        return marks

    def _took(self, test: TestResult) -> str:
        """How many runs an adaptive test took and why it stopped: ``took 7 runs (95% interval
        ±4.3 ≤ ±5 points)``; runs already started when it decided finish, and are counted."""
        stop = test.stop
        assert stop is not None
        why = safe(stop.message.replace(f" after {stop.runs} runs", "", 1))
        ran = len(test.runs)
        if ran > stop.runs:
            return self.text(f"took {plural(ran, 'run')} (decided after {stop.runs}: {why})")
        return self.text(f"took {plural(stop.runs, 'run')} ({why})")

    def _test(self, test: TestResult, width: int) -> list[str]:
        lines = [self._test_line(test, width)]
        if test.status == "skipped":
            return lines
        if test.baseline is not None:
            lines.extend(self._verdict(test.baseline))
        if self.options.verbose:
            lines.extend(self._statistics(test))
            many = len(test.runs) > 1
            for run in test.runs:
                lines.extend(self._run_verbose(run, f"run {run.run_number}: " if many else ""))
        else:
            lines.extend(self._failures(test))
        return lines

    # --- statistics (--verbose) and the comparison with the baseline ---

    def _statistics(self, test: TestResult) -> list[str]:
        """The test's statistics as the kernel took them: the score's interval, median, range
        and CV; the components' and metrics' means; pass@k and pass^k."""
        stats = test.statistics
        if stats is None:
            return []
        lines = []
        score = stats.score
        if score.n > 1:
            cv = f"CV {self.number(score.cv, '.2f')}"
            if score.stability is not None:
                cv += f" ({score.stability})"
            lines.append(
                f"score: 95% CI {self.interval(score.ci_95)}, median {self.number(score.median)}, "
                f"min {self.number(score.min)}, max {self.number(score.max)}, {cv}"
            )
        if test.pass_rule.rule != "all":
            lines.append(f"pass rule: {safe(test.pass_rule.describe())}")
        counted = []
        for name, component in stats.components.items():
            text = f"{safe(name)} {self.number(component.mean, '.2f')}"
            if component.n < stats.runs:
                text += f" ({component.n} of {stats.runs} runs)"
            counted.append(text)
        missing = [f"{name} ({_NOT_COUNTED[name]})" for name in COMPONENTS if name not in stats.components]
        if counted or missing:
            text = f"components (mean): {', '.join(counted) or 'none counted'}"
            if missing:
                text += f"; not counted: {', '.join(missing)}"
            lines.append(text)
        metrics = [
            self._metric(name, stats.metrics[name].mean) for name in METRIC_NAMES if name in stats.metrics
        ]
        if metrics:
            lines.append(f"metrics (mean): {', '.join(metrics)}")
        if stats.runs > 1 and stats.pass_at_k:
            at_k = ", ".join(f"pass@{k} {self.number(v, '.2f')}" for k, v in sorted(stats.pass_at_k.items()))
            hat_k = ", ".join(
                f"pass^{k} {self.number(v, '.2f')}" for k, v in sorted(stats.pass_hat_k.items()) if k > 1
            )
            lines.append(f"{at_k}; {hat_k}" if hat_k else at_k)
        return [self.paint(self.text(f"    {line}"), "dim") for line in lines]

    def _metric(self, name: str, mean: float) -> str:
        if not finite(mean):
            return f"{name} {self.text('—')}"
        if name == "total_tokens":
            return f"{mean:,.0f} tokens"
        if name == "total_steps":
            return f"{mean:,.1f} steps"
        if name == "tool_calls":
            return f"{mean:,.1f} tool calls"
        if name == "llm_calls":
            return f"{mean:,.1f} LLM calls"
        if name == "wall_time_seconds":
            return f"wall time {seconds(mean)}"
        if name == "cost_usd":
            return f"cost ${mean:.4f}"
        return f"{safe(name)} {mean:g}"

    def _verdict(self, comparison: TestComparison) -> list[str]:
        """The test against the baseline, in one line (two with ``--verbose``): the verdict
        that counts (Holm's unless the run's correction is ``none``), the change, the p-values,
        and the other verdict when it differs."""
        if comparison.verdict == "not_compared":
            reason = safe(comparison.reason or "no reason given")
            return [self.paint(f"    baseline: not compared: {reason}", "dim")]
        holm = self._holm
        main = comparison.verdict_holm if holm and comparison.verdict_holm is not None else comparison.verdict
        other = comparison.verdict if holm else comparison.verdict_holm
        change = self.number(comparison.delta, "+.1f")
        if finite(comparison.delta_percent):
            change += f" ({comparison.delta_percent:+.1f}%)"
        p = f"p={p_text(comparison.p_value)}"
        if comparison.p_holm is not None:
            p += f", Holm p={p_text(comparison.p_holm)}"
        color = _VERDICT_COLORS[main]
        if comparison.method == "sequential":
            text = f"{_VERDICTS[main]} {change} by the sequential rule (Welch {p})"
        elif holm and other != main and other in ("regression", "improvement"):
            text = f"{_VERDICTS[main]} {change} after Holm's correction; {other} before it ({p})"
            color = "yellow"
        elif not holm and other is not None and other != main and main in ("regression", "improvement"):
            text = f"{_VERDICTS[main]} {change} ({p}); not significant after Holm's correction"
        else:
            text = f"{_VERDICTS[main]} {change} {p}"
        if comparison.changed:
            text += "; the test changed since the baseline was saved"
            color = "yellow" if color == "dim" else color
        lines = [self.paint(self.text(f"    baseline: {text}"), color)]
        if self.options.verbose:
            detail = (
                f"      95% CI of the difference {self.interval(comparison.ci_95, '+.1f')}; baseline "
                f"{self.number(comparison.baseline_mean)} ({plural(comparison.baseline_runs, 'run')}), this run "
                f"{self.number(comparison.current_mean)} ({plural(comparison.current_runs, 'run')})"
            )
            if comparison.method is not None:
                detail += f"; {_METHODS.get(comparison.method, comparison.method)}"
            lines.append(self.paint(self.text(detail), "dim"))
            if comparison.reason:
                lines.append(self.paint(self.text(f"      note: {safe(comparison.reason)}"), "dim"))
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
        for run in test.runs:
            if run.outcome != "passed":
                lines.extend(self._retries(run, f"run {run.run_number}: " if many else ""))
        return lines

    def _retries(self, run: RunResult, prefix: str) -> list[str]:
        """The attempts of a run that met a fault of the infrastructure and were made again:
        ``retried: attempt 1 on <where>: <reason> (waited 0.5 s)``."""
        lines = []
        for retry in run.retries:
            where = f" on {safe(shorten(retry.where, PREVIEW_CHARS))}" if retry.where else ""
            text = (
                f"    ~ {prefix}retried: attempt {retry.attempt}{where}: "
                f"{safe(shorten(retry.reason, PREVIEW_CHARS))} (waited {waited(retry.waited_seconds)})"
            )
            lines.append(self.paint(text, "yellow"))
        return lines

    # --- everything about each run (--verbose) ---

    def _run_verbose(self, run: RunResult, prefix: str) -> list[str]:
        lines: list[str] = []
        if run.error:
            color = "yellow" if run.outcome == "passed" else "red"
            lines.append(self.paint(f"    - {prefix}{safe(run.status)}: {safe(run.error)}", color))
        lines.extend(self._retries(run, prefix))
        for item in run.checks:
            if item.skipped is not None:
                text = (
                    f"    {self.symbols['skipped']} {prefix}{safe(item.name)}: skipped: {safe(item.skipped)}"
                )
                lines.append(self.paint(text, "yellow"))
                continue
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
            lines.append(
                self.paint(f"    {prefix}agent log (last {plural(len(run.log_tail), 'line')}):", "dim")
            )
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
        held = {
            kind: sum(t.quarantined and t.status == kind for t in results.tests)
            for kind in ("failed", "error")
        }
        parts = [
            self.paint(f"{s.passed} passed", "green") if s.passed else f"{s.passed} passed",
            self._counted(f"{s.failed} failed", s.failed, held["failed"]),
            f"{s.skipped} skipped",
        ]
        if s.errors:
            parts.append(self._counted(plural(s.errors, "error"), s.errors, held["error"]))
        ran = s.total - s.skipped
        rate = f" ({100.0 * s.passed / ran:.1f}%)" if ran else ""
        extra = []
        if s.deselected:
            extra.append(f"{s.deselected} deselected")
        if results.interrupted:
            extra.append(self.paint("interrupted", "yellow"))
        if results.problems:
            extra.append(
                self.paint(f"{plural(len(results.problems), 'problem')} with the run directory", "red")
            )
        tail = f"; {', '.join(extra)}" if extra else ""
        return f"Summary: {', '.join(parts)}{rate}{tail}"

    def _counted(self, text: str, count: int, quarantined: int) -> str:
        """A count of failed (or errored) tests, saying how many of them are quarantined: those
        do not fail the run."""
        if not count:
            return text
        if not quarantined:
            return self.paint(text, "red")
        which = "quarantined" if quarantined == count else f"{quarantined} quarantined"
        return self.paint(
            f"{text} ({which}, not failing the run)", "red" if quarantined < count else "yellow"
        )

    def _reliability(self, results: SuiteResults) -> list[str]:
        """Under the summary: the flaky tests, the quarantined ones with their statuses, the
        retries, the budget and the shard."""
        lines = []
        flaky = [safe(t.id) for t in results.tests if t.flaky]
        if flaky:
            lines.append(
                self.paint(
                    f"Flaky: {id_list(flaky)} (their runs disagree: some passed, some failed)", "yellow"
                )
            )
        quarantined = [f"{safe(t.id)} ({t.status})" for t in results.tests if t.quarantined]
        if quarantined:
            note = "their failures are reported but do not fail the run"
            lines.append(self.paint(f"Quarantined: {id_list(quarantined)}; {note}", "yellow"))
        retried = [run for test in results.tests for run in test.runs if run.retries]
        if retried:
            total = sum(len(run.retries) for run in retried)
            lines.append(
                f"Retries: {total} over {plural(len(retried), 'run')} "
                "(attempts made again after faults of the infrastructure)"
            )
        if results.budget is not None:
            lines.extend(self._budget(results, results.budget))
        if results.shard is not None:
            lines.append(self._shard(results.shard))
        return lines

    def _budget(self, results: SuiteResults, budget: Budget) -> list[str]:
        """What the run spent of its budget; when the budget stopped it, what it left out."""
        cost = f"spent {usd(budget.spent_cost_usd)}"
        if budget.max_cost_usd is not None:
            cost += f" of {usd(budget.max_cost_usd)}"
        tokens = f"{budget.spent_tokens:,}"
        if budget.max_tokens is not None:
            tokens += f" of {budget.max_tokens:,}"
        lines = [f"Budget: {cost}, {tokens} tokens"]
        exceeded = safe(budget.exceeded) if budget.exceeded else "the budget was spent"
        if results.stopped_by == "budget":
            why = f"not run: {BUDGET_EXCEEDED}"
            left_out = sum(
                1 for t in results.tests if t.status == "skipped" and (t.skip_reason or "").startswith(why)
            )
            line = f"{BUDGET_EXCEEDED}: {exceeded}; {plural(left_out, 'test')} not run"
            cut_short = results.summary.incomplete - left_out
            if cut_short > 0:
                line += f", {cut_short} with runs missing"
            lines.append(self.paint(self.text(f"{line} — the suite is incomplete"), "red"))
        elif budget.exceeded:
            lines[0] += self.paint(f"; exceeded: {exceeded}", "yellow")
        return lines

    def _shard(self, shard: Shard) -> str:
        how = f"balanced by the durations of run {safe(shard.basis)}" if shard.basis else "shared by count"
        return f"Shard {shard.index} of {shard.count} ({how})"

    def _skipped_checks(self, results: SuiteResults) -> list[str]:
        """Checks that were not made, by reason: never counted as passed, so always said."""
        reasons: dict[str, list[str]] = {}
        for test in results.tests:
            for item in test.skipped_checks:
                names = reasons.setdefault(item.skipped or "", [])
                if item.name not in names:
                    names.append(item.name)
        lines = []
        for reason, names in reasons.items():
            count = sum(1 for t in results.tests for c in t.skipped_checks if (c.skipped or "") == reason)
            listing = shorten(", ".join(names), PREVIEW_CHARS)
            lines.append(self.paint(f"Skipped checks: {count} ({safe(listing)}): {safe(reason)}", "yellow"))
        return lines

    def _evaluation_usage(self, results: SuiteResults) -> list[str]:
        """What the evaluators spent (an LLM judge's calls), apart from the agent's figures."""
        lines = []
        for key, used in results.evaluation_usage.items():
            tokens = used.input_tokens + used.output_tokens
            parts = [plural(used.calls, "call")]
            if used.cached:
                parts.append(f"{used.cached} from the cache")
            parts.append(f"{tokens:,} tokens")
            if used.cost_usd is not None:
                parts.append(f"${used.cost_usd:.4f}")
            lines.append(f"Evaluation: {safe(key)}: {', '.join(parts)} (not in the agent's figures)")
        return lines

    def _suite_statistics(self, results: SuiteResults) -> list[str]:
        """When tests ran several runs: the suite's pass@1 and pass^k (for the largest k every
        test's runs allow) and the tests whose score is unstable."""
        stats = results.statistics
        if stats is None or not any(len(t.runs) > 1 for t in results.tests):
            return []
        lines = []
        ran = sum(1 for t in results.tests if t.statistics is not None)
        parts = []
        if 1 in stats.pass_at_k:
            parts.append(f"pass@1 {self.number(stats.pass_at_k[1], '.2f')}")
        ks = [k for k in stats.pass_hat_k if k > 1]
        if ks:
            k = max(ks)
            parts.append(f"pass^{k} {self.number(stats.pass_hat_k[k], '.2f')}")
        if parts:
            lines.append(f"Pass rates: {', '.join(parts)} (mean over {plural(ran, 'test')})")
        if stats.unstable:
            levels = {t.id: t.statistics.score.stability for t in results.tests if t.statistics is not None}
            shown = [f"{safe(i)} ({levels.get(i) or '?'})" for i in stats.unstable[:MAX_IDS_SHOWN]]
            more = len(stats.unstable) - len(shown)
            listing = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
            lines.append(self.paint(f"Unstable: {listing}", "yellow"))
        return lines

    def _baseline_summary(self, comparison: BaselineComparison, tests: list[TestResult]) -> list[str]:
        """The run against its baseline: what was compared and found, what the baseline has
        that the run did not run, and what kept a comparison from being made."""
        holm = comparison.correction == "holm"
        regressions = comparison.regressions_holm if holm else comparison.regressions
        improvements = comparison.improvements_holm if holm else comparison.improvements
        unchanged = max(comparison.compared - regressions - improvements, 0)
        not_compared = sum(
            1 for t in tests if t.baseline is not None and t.baseline.verdict == "not_compared"
        )
        about = []
        if comparison.agent:
            about.append(safe(comparison.agent))
        if comparison.created_at is not None:
            about.append(f"{comparison.created_at:%Y-%m-%d %H:%M %Z}".rstrip())
        name = safe(comparison.file) if comparison.file else "the baseline"
        label = f"Baseline: {name}" + (f" ({', '.join(about)})" if about else "")
        counts = [
            self.paint(plural(regressions, "regression"), "red") if regressions else plural(0, "regression"),
            self.paint(plural(improvements, "improvement"), "green")
            if improvements
            else plural(0, "improvement"),
            f"{unchanged} unchanged",
            f"{not_compared} not compared",
        ]
        line = f"{label}: {', '.join(counts)}"
        raw = (comparison.regressions, comparison.improvements)
        if holm and raw != (regressions, improvements):
            line += (
                f" (with Holm's correction; without it {plural(raw[0], 'regression')}, "
                f"{plural(raw[1], 'improvement')})"
            )
        if regressions:
            if comparison.fail_on_regression:
                line += self.paint("; regressions fail the run", "red")
            else:
                line += "; regressions do not fail the run (--fail-on-regression=false)"
        lines = [line]
        if comparison.not_in_run:
            shown = ", ".join(safe(i) for i in comparison.not_in_run[:MAX_IDS_SHOWN])
            more = len(comparison.not_in_run) - MAX_IDS_SHOWN
            shown += f" and {more} more" if more > 0 else ""
            lines.append(self.paint(f"  in the baseline but not in this run: {shown}", "yellow"))
        for problem in comparison.problems:
            lines.append(self.paint(f"  Problem with the baseline: {safe(problem)}", "red"))
        return lines


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
