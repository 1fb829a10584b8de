"""The ``console`` reporter: results for a person at a terminal (the default output).

One line per test (✓/✗, score, spread over runs, duration) with its failed checks under it, and
a summary ``X passed, Y failed, Z skipped``. ``--verbose`` adds every check, the agent's error,
warnings and the end of its log. Colour only on a terminal, never with ``NO_COLOR`` set. While
tests run on a terminal, a progress line shows how many runs are done.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import TextIO

from atp.core.hookspecs import hookimpl
from atp.core.reporter import Reporter, ReportOptions
from atp.core.results import RunHeader, RunResult, RunStore, SuiteResults, TestResult
from atp.core.text import printable as safe

_COLORS = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}


def use_color(stream: TextIO, forced: bool | None = None) -> bool:
    if forced is not None:
        return forced
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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


class ConsoleReporter(Reporter):
    name = "console"
    summary = "results in the terminal: a line per test, failed checks, a summary (the default)"

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
        self._progress_total = 0
        self._progress_done = 0
        self._progress_failed = 0
        self._progress_shown = False

    def paint(self, text: str, color: str) -> str:
        if not self.color:
            return text
        return f"\033[{_COLORS[color]}m{text}\033[0m"

    # --- progress while running (lifecycle hooks) -------------------------------------------

    @property
    def live(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    @hookimpl
    def atp_suite_started(self, header: RunHeader) -> None:
        self._progress_total = sum(t.runs for t in header.tests if t.skip is None)

    @hookimpl
    def atp_run_finished(self, result: RunResult) -> None:
        self._progress_done += 1
        if result.outcome != "passed":
            self._progress_failed += 1
        if not self.live:
            return
        failed = f", {self._progress_failed} not passed" if self._progress_failed else ""
        line = (
            f"running: {self._progress_done}/{self._progress_total} runs done{failed}"
            f" (last: {safe(result.test_id)} #{result.run_number} {result.outcome})"
        )
        self.stream.write("\r\033[K" + self.paint(line, "dim"))
        self.stream.flush()
        self._progress_shown = True

    def clear_progress(self) -> None:
        if self._progress_shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._progress_shown = False

    # --- the report --------------------------------------------------------------------------

    def report(self, results: SuiteResults, store: RunStore) -> None:
        self.clear_progress()
        out: list[str] = []
        out.append(self.paint("ATP Test Results", "bold"))
        out.append("================")
        out.append("")
        out.append(f"Suite: {safe(results.suite)}")
        out.append(f"Agent: {safe(results.agent)} ({safe(results.agent_type)})")
        runs = {t.planned_runs for t in results.tests if t.skip_reason is None}
        if runs:
            out.append(f"Runs per test: {', '.join(str(r) for r in sorted(runs))}")
        out.append(f"Run directory: {safe(shown_path(store.directory))}")
        out.append("")
        out.append("Tests:")
        width = max((len(safe(t.id)) for t in results.tests), default=0)
        for test in results.tests:
            out.extend(self._test(test, width))
        out.append("")
        for problem in results.problems:
            out.append(self.paint(f"Problem: {safe(problem)}", "red"))
        out.append(self._summary(results))
        out.append(f"Total time: {seconds(results.duration_seconds)}")
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def _test(self, test: TestResult, width: int) -> list[str]:
        color = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}
        mark = self.paint(self.symbols[test.status], color[test.status])
        test_id = safe(test.id).ljust(width)
        if test.status == "skipped":
            return [f"  {mark} {test_id}  skipped: {safe(test.skip_reason or '')}"]
        spread = ""
        if len(test.runs) > 1:
            sd = statistics.stdev(r.score for r in test.runs)
            spread = f"  ({self.sigma}={sd:.1f}, {len(test.runs)} runs)"
        incomplete = ""
        if len(test.runs) < test.planned_runs:
            incomplete = self.paint(f"  {len(test.runs)}/{test.planned_runs} runs", "yellow")
        line = (
            f"  {mark} {test_id}  {test.score:5.1f}/100{spread}"
            f"  [{seconds(test.duration_seconds)}]{incomplete}"
        )
        lines = [line]
        many = len(test.runs) > 1
        for run in test.runs:
            prefix = f"run {run.run_number}: " if many else ""
            lines.extend(self._run_details(run, prefix))
        return lines

    def _run_details(self, run: RunResult, prefix: str) -> list[str]:
        verbose = self.options.verbose
        lines: list[str] = []
        if run.error and (run.outcome != "passed" or verbose):
            lines.append(self.paint(f"    - {prefix}{run.status}: {safe(run.error)}", "red"))
        for item in run.checks:
            if item.passed and not verbose:
                continue
            mark = self.symbols["passed" if item.passed else "failed"]
            text = f"    {mark if verbose else '-'} {prefix}{safe(item.name)}: {safe(item.message)}"
            if verbose and item.score not in (0.0, 1.0):
                text += f" (score {item.score:.2f})"
            lines.append(self.paint(text, "dim" if item.passed else "red"))
        if verbose:
            for warning in run.warnings:
                lines.append(self.paint(f"    ! {prefix}warning: {safe(warning)}", "yellow"))
            if run.score_breakdown:
                parts = ", ".join(f"{safe(k)} {v:.2f}" for k, v in run.score_breakdown.items())
                lines.append(self.paint(f"    {prefix}score {run.score:.1f}: {parts}", "dim"))
            if run.log_tail:
                lines.append(self.paint(f"    {prefix}agent log (last {len(run.log_tail)} lines):", "dim"))
                lines.extend(self.paint(f"      | {safe(line)}", "dim") for line in run.log_tail)
        return lines

    def _summary(self, results: SuiteResults) -> str:
        s = results.summary
        parts = [
            self.paint(f"{s.passed} passed", "green") if s.passed else f"{s.passed} passed",
            self.paint(f"{s.failed} failed", "red") if s.failed else f"{s.failed} failed",
            f"{s.skipped} skipped",
        ]
        if s.errors:
            parts.append(self.paint(f"{s.errors} errors", "red"))
        ran = s.total - s.skipped
        rate = f" ({100.0 * s.passed / ran:.1f}%)" if ran else ""
        extra = []
        if s.deselected:
            extra.append(f"{s.deselected} deselected")
        if results.interrupted:
            extra.append(self.paint("interrupted", "yellow"))
        if results.problems:
            extra.append(self.paint(f"{len(results.problems)} problems with the run directory", "red"))
        tail = f"; {', '.join(extra)}" if extra else ""
        return f"Summary: {', '.join(parts)}{rate}{tail}"

