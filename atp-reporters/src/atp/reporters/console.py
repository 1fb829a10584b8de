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
about once a second by a daemon thread, and the report lists every test under ``Tests:``.
Without a terminal (a CI log) each test's entry (its line and what follows it) is printed as it
finishes, and the report does not print it again: it lists only the tests not printed yet (not
run, skipped) and, with a baseline, each test's verdict under ``Against the baseline:`` (a
verdict needs every test's p-value). ``atp report`` prints the whole report, header included.

The report's parts are rendered by the modules of :mod:`atp.reporters.terminal`; this module
puts them together, in order, and drives the live progress from the runner's hooks.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec

from atp.core.hookspecs import hookimpl
from atp.core.reporter import Reporter, ReportOptions
from atp.core.results import PassRule, RunHeader, RunResult, RunStore, SuiteResults, TestResult
from atp.core.text import printable as safe
from atp.reporters.terminal.artifacts import MAX_ARTIFACTS_SHOWN, PREVIEW_LINES, preview
from atp.reporters.terminal.baseline import baseline_summary_lines, verdict_lines
from atp.reporters.terminal.entry import entry_lines
from atp.reporters.terminal.failures import agent_failed, follow_on_checks
from atp.reporters.terminal.statistics import COMPONENTS, suite_statistics_lines
from atp.reporters.terminal.status import TICK_SECONDS, StatusLine
from atp.reporters.terminal.style import Style, isatty, use_color
from atp.reporters.terminal.summary import (
    evaluation_usage_lines,
    reliability_lines,
    skipped_check_lines,
    summary_line,
)
from atp.reporters.terminal.words import (
    MAX_IDS_SHOWN,
    PREVIEW_CHARS,
    clock,
    finite,
    id_list,
    p_text,
    plural,
    run_labels,
    runs_label,
    seconds,
    shown_path,
    usd,
    waited,
    which_runs,
)

# What this module offers; most of it is made in atp.reporters.terminal and kept importable here.
__all__ = [
    "COMPONENTS",
    "MAX_ARTIFACTS_SHOWN",
    "MAX_IDS_SHOWN",
    "PREVIEW_CHARS",
    "PREVIEW_LINES",
    "REPORT_LINES_PER_WRITE",
    "TICK_SECONDS",
    "ConsoleReporter",
    "StatusLine",
    "agent_failed",
    "clock",
    "finite",
    "follow_on_checks",
    "header_lines",
    "id_list",
    "p_text",
    "plural",
    "preview",
    "runs_label",
    "seconds",
    "shown_path",
    "usd",
    "use_color",
    "waited",
    "which_runs",
]

REPORT_LINES_PER_WRITE = 1000
"""The report is written this many lines at a time (a suite of 10,000 tests is not first built
as one string)."""


def header_lines(
    suite: str,
    agent: str,
    agent_type: str,
    runs: list[str],
    directory: Path,
    style: Style,
    config: str | None = None,
) -> list[str]:
    """``ATP Test Results``: the suite, the agent, the config (when the command says which),
    the runs per test and the run directory."""
    out = [style.paint("ATP Test Results", "bold"), "================", ""]
    out.append(f"Suite: {safe(suite)}")
    out.append(f"Agent: {safe(agent)} ({safe(agent_type)})")
    if config is not None:
        out.append(f"Config: {safe(config)}")
    if runs:
        out.append(f"Runs per test: {', '.join(runs)}")
    out.append(f"Run directory: {safe(shown_path(directory))}")
    out.append("")
    return out


class ConsoleReporter(Reporter):
    name = "console"
    summary = (
        "results in the terminal: a line per test, failures with their evidence, a summary (the default)"
    )

    def __init__(self, options: ReportOptions) -> None:
        super().__init__(options)
        self.stream = options.stream
        self.style = Style(self.stream, options.color)
        """Colour and symbols for this stream (``paint``, ``text``, ``number``... delegate to it)."""
        self.status: StatusLine | None = None
        self._header_shown: Path | None = None
        """The run directory whose header the live run printed (not printed again)."""
        self._width = 0
        self._resumed: int | None = None
        """``atp test --resume``: the runs the run directory already held."""
        self._lines_shown = False
        self._shown: dict[str, list[str]] = {}
        """Without a terminal: each test printed as it finished, and the lines printed for it."""
        self._progress_off = False
        self._holm = True
        """Which verdict against the baseline counts: Holm's, unless the run's correction is ``none``."""

    def paint(self, text: str, color: str) -> str:
        return self.style.paint(text, color)

    def text(self, text: str) -> str:
        """ATP's own wording for this stream (see :meth:`Style.text`)."""
        return self.style.text(text)

    def number(self, value: float | None, spec: str = ".1f") -> str:
        """A figure, or ``—`` when it is undefined (see :meth:`Style.number`)."""
        return self.style.number(value, spec)

    def interval(self, bounds: tuple[float, float] | None, spec: str = ".1f") -> str:
        return self.style.interval(bounds, spec)

    def rule(self, rule: PassRule) -> str:
        """A pass rule in brief (see :meth:`Style.rule`)."""
        return self.style.rule(rule)

    @property
    def live(self) -> bool:
        """The stream is a terminal: progress is a status line rewritten in place."""
        return isatty(self.stream)

    # --- progress while running (lifecycle hooks: cheap, never raising) -----------------------

    @hookimpl
    def atp_suite_resumed(self, done: int) -> None:
        self._resumed = done

    @hookimpl
    def atp_suite_started(self, header: RunHeader, directory: Path) -> None:
        if self.options.quiet:  # no header, no progress: the report says what did not pass
            self._progress_off = True
            return
        try:
            planned = [t for t in header.tests if t.skip is None]
            self._width = max((len(safe(t.id)) for t in header.tests), default=0)
            labels = run_labels({(t.runs, t.adaptive) for t in planned})
            lines = header_lines(
                header.suite,
                header.agent,
                header.agent_type,
                labels,
                directory,
                self.style,
                self.options.config,
            )
            live = self.live
            total = sum(len(t.run_numbers) if t.run_numbers is not None else t.runs for t in planned)
            up_to = any(t.adaptive is not None for t in planned)
            most = "up to " if up_to else ""
            if self._resumed is not None:
                total = max(total - self._resumed, 0)
                lines.append(
                    f"Resuming {safe(shown_path(directory))}: {self._resumed} of {most}"
                    f"{plural(self._resumed + total, 'run')} already done"
                )
            if not live and planned:
                left = " left" if self._resumed is not None else ""
                lines.append(f"Running {plural(len(planned), 'test')} ({most}{plural(total, 'run')}{left}):")
            self._write("\n".join(lines) + "\n")
            if self._progress_off:  # the stream failed: the report prints everything
                return
            self._header_shown = directory
            self._lines_shown = not live and bool(planned)
            if live:
                self.status = StatusLine(
                    self.stream, lambda text: self.style.paint(text, "dim"), total, up_to
                )
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
                lines = self._entry(result, self._width)
                self._write("\n".join(lines) + "\n")
                self._shown[result.id] = lines
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

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self._stop_progress()
        self._holm = results.baseline is None or results.baseline.correction == "holm"
        out: list[str] = []
        if self.options.quiet:
            self._quiet_report(results)
            return
        live = self._header_shown is not None and self._header_shown == store.directory
        if live:
            if self._lines_shown:
                out.append("")
        else:
            labels = run_labels(
                {(t.planned_runs, t.adaptive) for t in results.tests if t.skip_reason is None}
            )
            out.extend(
                header_lines(
                    results.suite,
                    results.agent,
                    results.agent_type,
                    labels,
                    store.directory,
                    self.style,
                    self.options.config,
                )
            )
        out = self._tests_section(results, out, self._shown if live and self._lines_shown else {})
        out.extend(self._problems(results))
        out.append(summary_line(results, self.style))
        out.extend(reliability_lines(results, self.style))
        out.extend(skipped_check_lines(results, self.style))
        out.extend(evaluation_usage_lines(results))
        out.extend(suite_statistics_lines(results, self.style))
        if results.baseline is not None:
            out.extend(baseline_summary_lines(results.baseline, results.tests, self.style))
        out.append(f"Total time: {seconds(results.duration_seconds)}")
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def _tests_section(self, results: SuiteResults, out: list[str], shown: dict[str, list[str]]) -> list[str]:
        """``Tests:``, each test's entry, written as it grows; what is left to write is returned.

        ``shown``: the tests already printed as they finished (without a terminal), each once:
        those printed as they are now are not repeated, and for those that only gained their
        verdict against the baseline (it needs every test's p-value) the verdicts follow
        ``Against the baseline:``."""
        width = max((len(safe(t.id)) for t in results.tests), default=0)
        listed: list[TestResult] = []
        verdicts: list[str] = []
        for test in results.tests:
            before = shown.get(test.id)
            if before is None:
                listed.append(test)
            elif (
                test.baseline is not None
                and self._entry(msgspec.structs.replace(test, baseline=None), width) == before
            ):
                verdicts.append(f"  {safe(test.id)}")
                verdicts.extend(
                    verdict_lines(test.baseline, self.style, holm=self._holm, verbose=self.options.verbose)
                )
            elif self._entry(test, width) != before:
                listed.append(test)  # it changed since it was printed (it is printed again, whole)
        if listed or not shown:
            out.append("Tests:")
        for test in listed:
            out.extend(self._entry(test, width))
            if len(out) >= REPORT_LINES_PER_WRITE:
                self.stream.write("\n".join(out) + "\n")
                out = []
        if listed or not shown:
            out.append("")
        if verdicts:
            out.extend(["Against the baseline:", *verdicts, ""])
        return out

    def _quiet_report(self, results: SuiteResults) -> None:
        """``--quiet``: the tests that did not pass with their failures, then the summary."""
        shown = [t for t in results.tests if t.status in ("failed", "error")]
        width = max((len(safe(t.id)) for t in shown), default=0)
        out: list[str] = []
        for test in shown:
            out.extend(self._entry(test, width))
        if shown:
            out.append("")
        out.extend(self._problems(results))
        out.append(f"{summary_line(results, self.style)} in {seconds(results.duration_seconds)}")
        out.extend(reliability_lines(results, self.style))
        out.extend(skipped_check_lines(results, self.style))
        if results.baseline is not None:
            out.extend(baseline_summary_lines(results.baseline, results.tests, self.style))
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def _entry(self, test: TestResult, width: int) -> list[str]:
        """A test's line and the lines under it, as this report's options ask."""
        return entry_lines(test, width, self.style, verbose=self.options.verbose, holm=self._holm)

    def _problems(self, results: SuiteResults) -> list[str]:
        """The problems met with the run directory, one line each, before the summary."""
        return [self.style.paint(f"Problem: {safe(problem)}", "red") for problem in results.problems]
