"""A test's entry in the console report: its one line, then what follows it.

The line: the test's mark, id, score and time (with several runs, per run and in all); with several runs the score's spread, how many
runs passed (and the pass rule), its stability, how an adaptive run count decided; and its
marks (``flaky``, ``quarantined``, retries, checks skipped). Under it: the verdict against the
baseline, then its failures (the default) or, with ``--verbose``, its statistics and everything
about each run.
"""

from __future__ import annotations

from atp.core.results import TestResult
from atp.core.stats import stability_word
from atp.core.text import printable as safe
from atp.reporters.terminal.baseline import verdict_lines
from atp.reporters.terminal.failures import failure_lines
from atp.reporters.terminal.run_details import run_lines
from atp.reporters.terminal.statistics import statistics_lines
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import finite, plural, seconds

TEST_COLORS = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}
"""The colour of a test's mark, by its status."""
STABILITY_COLORS = {"moderate": "dim", "unstable": "yellow", "critical": "red"}
"""The colour of a test's stability level (``stable`` is not shown; ``critical`` is shown as
``very unstable``)."""


def result_line(test: TestResult, width: int, style: Style) -> str:
    """The test's one line; its id padded to ``width`` so that the columns line up."""
    mark = style.paint(style.symbols[test.status], TEST_COLORS[test.status])
    test_id = safe(test.id).ljust(width)
    if test.status == "skipped":
        return f"  {mark} {test_id}  skipped: {safe(test.skip_reason or '')}"
    ran = len(test.runs)
    time_part = time_text(test)
    line = f"  {mark} {test_id}  {test.score:5.1f}/100  "
    unmade = len(test.skipped_checks)
    not_made = style.paint(f"{plural(unmade, 'check')} skipped", "yellow") if unmade else ""
    marks = mark_texts(test, style)
    if not_made:
        marks.append(not_made)
    if ran <= 1 and test.planned_runs <= 1 and test.adaptive is None:
        return f"{line}{time_part:<10}  {', '.join(marks)}" if marks else line + time_part
    stats = test.statistics
    std = stats.score.std if stats is not None and ran > 1 else None
    spread = f"({style.sigma}={std:.1f})" if finite(std) else ""
    spread = spread.ljust(len(style.sigma) + 7)  # "(sd=12.3)" at most: the column lines up
    parts = runs_parts(test, style)
    level = stats.score.stability if stats is not None and finite(std) else None
    if level is not None and level != "stable":
        parts.append(style.paint(stability_word(level), STABILITY_COLORS.get(level, "yellow")))
    parts.extend(marks)
    return f"{line}{spread}  {time_part:<10}  {', '.join(parts)}".rstrip()


def time_text(test: TestResult) -> str:
    """A test's time: ``time 0.42s`` for one run; for several, the mean per run and the total
    (``time 1.20s/run, 12.0s total``): a test's duration is the sum of its runs'."""
    ran = len(test.runs)
    if ran <= 1:
        return f"time {seconds(test.duration_seconds)}"
    return f"time {seconds(test.duration_seconds / ran)}/run, {seconds(test.duration_seconds)} total"


def runs_parts(test: TestResult, style: Style) -> list[str]:
    """What a test of several runs says of them: how many passed (when not all did, or its
    rule is not ``all``), how an adaptive run count decided, or how many runs were not run."""
    ran = len(test.runs)
    stats = test.statistics
    passed = stats.passed_runs if stats is not None else sum(r.outcome == "passed" for r in test.runs)
    decided = test.adaptive is not None and test.stop is not None
    unfinished = ran < test.planned_runs and not decided
    parts = []
    if passed < ran or test.pass_rule.rule != "all" or unfinished:
        runs_part = f"{passed}/{plural(ran, 'run')} passed"
        if test.pass_rule.rule != "all":
            runs_part += f" (rule: {style.rule(test.pass_rule)})"
        parts.append(runs_part)
    if test.adaptive is not None and test.stop is not None:
        parts.append(took(test, style))
    elif test.adaptive is not None and unfinished:
        parts.append(style.paint("not finished: stopped before its rule decided", "yellow"))
    elif unfinished:
        parts.append(style.paint(f"{test.planned_runs - ran} not run", "yellow"))
    return parts


def mark_texts(test: TestResult, style: Style) -> list[str]:
    """What a test's line says of its reliability: ``flaky`` (its runs disagree),
    ``quarantined`` (a failure does not fail the run) and its retries."""
    marks = []
    if test.flaky:
        marks.append(style.paint("flaky", "yellow"))
    if test.quarantined:
        marks.append(style.paint("quarantined", "yellow"))
    if test.retries:
        marks.append(style.paint(plural(test.retries, "retry", "retries"), "dim"))
    return marks


def took(test: TestResult, style: Style) -> str:
    """How many runs an adaptive test took and why it stopped: ``took 7 runs (95% interval
    ±4.3 ≤ ±5 points)``; runs already started when it decided finish, and are counted."""
    stop = test.stop
    assert stop is not None
    why = safe(stop.message.replace(f" after {stop.runs} runs", "", 1))
    ran = len(test.runs)
    if ran > stop.runs:
        return style.text(f"took {plural(ran, 'run')} (decided after {stop.runs}: {why})")
    return style.text(f"took {plural(stop.runs, 'run')} ({why})")


def entry_lines(test: TestResult, width: int, style: Style, *, verbose: bool, holm: bool) -> list[str]:
    """The test's line and the lines under it; ``holm``: Holm's verdict against the baseline is
    the one that counts (the run's correction is not ``none``)."""
    lines = [result_line(test, width, style)]
    if test.status == "skipped":
        return lines
    if test.baseline is not None:
        lines.extend(verdict_lines(test.baseline, style, holm=holm, verbose=verbose))
    if verbose:
        lines.extend(statistics_lines(test, style))
        many = len(test.runs) > 1
        for run in test.runs:
            lines.extend(run_lines(run, f"run {run.run_number}: " if many else "", style))
    else:
        lines.extend(failure_lines(test, style))
    return lines
