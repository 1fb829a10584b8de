"""The run against its baseline in the console report: each test's verdict under its line, and
a ``Baseline:`` section under the summary (what was compared and found, what the baseline has
that the run did not run, what kept a comparison from being made). Every figure is the kernel's."""

from __future__ import annotations

from atp.core.baseline import BaselineComparison, TestComparison
from atp.core.results import TestResult
from atp.core.text import printable as safe
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import finite, id_list, p_text, plural

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


def verdict_lines(comparison: TestComparison, style: Style, *, holm: bool, verbose: bool) -> list[str]:
    """The test against the baseline, in one line (two with ``verbose``): the verdict that
    counts (Holm's when ``holm``: the run's correction is not ``none``), the change, the
    p-values, and the other verdict when it differs."""
    if comparison.verdict == "not_compared":
        reason = safe(comparison.reason or "no reason given")
        return [style.paint(f"    baseline: not compared: {reason}", "dim")]
    main = comparison.verdict_holm if holm and comparison.verdict_holm is not None else comparison.verdict
    other = comparison.verdict if holm else comparison.verdict_holm
    change = style.number(comparison.delta, "+.1f")
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
    lines = [style.paint(style.text(f"    baseline: {text}"), color)]
    if verbose:
        lines.extend(_verdict_detail(comparison, style))
    return lines


def _verdict_detail(comparison: TestComparison, style: Style) -> list[str]:
    """``--verbose``: the 95% interval of the difference, both means and the method; a note."""
    detail = (
        f"      95% CI of the difference {style.interval(comparison.ci_95, '+.1f')}; baseline "
        f"{style.number(comparison.baseline_mean)} ({plural(comparison.baseline_runs, 'run')}), this run "
        f"{style.number(comparison.current_mean)} ({plural(comparison.current_runs, 'run')})"
    )
    if comparison.method is not None:
        detail += f"; {_METHODS.get(comparison.method, comparison.method)}"
    lines = [style.paint(style.text(detail), "dim")]
    if comparison.reason:
        lines.append(style.paint(style.text(f"      note: {safe(comparison.reason)}"), "dim"))
    return lines


def baseline_summary_lines(
    comparison: BaselineComparison, tests: list[TestResult], style: Style
) -> list[str]:
    """The run against its baseline: what was compared and found, what the baseline has
    that the run did not run, and what kept a comparison from being made."""
    holm = comparison.correction == "holm"
    regressions = comparison.regressions_holm if holm else comparison.regressions
    improvements = comparison.improvements_holm if holm else comparison.improvements
    unchanged = max(comparison.compared - regressions - improvements, 0)
    not_compared = sum(1 for t in tests if t.baseline is not None and t.baseline.verdict == "not_compared")
    counts = [
        style.paint(plural(regressions, "regression"), "red") if regressions else plural(0, "regression"),
        style.paint(plural(improvements, "improvement"), "green")
        if improvements
        else plural(0, "improvement"),
        f"{unchanged} unchanged",
        f"{not_compared} not compared",
    ]
    line = f"{_label(comparison)}: {', '.join(counts)}"
    raw = (comparison.regressions, comparison.improvements)
    if holm and raw != (regressions, improvements):
        line += (
            f" (with Holm's correction; without it {plural(raw[0], 'regression')}, "
            f"{plural(raw[1], 'improvement')})"
        )
    if regressions:
        if comparison.fail_on_regression:
            line += style.paint("; regressions fail the run", "red")
        else:
            line += "; regressions do not fail the run (--fail-on-regression=false)"
    lines = [line]
    if comparison.not_in_run:
        shown = id_list([safe(i) for i in comparison.not_in_run])
        lines.append(style.paint(f"  in the baseline but not in this run: {shown}", "yellow"))
    for problem in comparison.problems:
        lines.append(style.paint(f"  Problem with the baseline: {safe(problem)}", "red"))
    return lines


def _label(comparison: BaselineComparison) -> str:
    """``Baseline: <file> (<agent>, <when it was made>)``."""
    about = []
    if comparison.agent:
        about.append(safe(comparison.agent))
    if comparison.created_at is not None:
        about.append(f"{comparison.created_at:%Y-%m-%d %H:%M %Z}".rstrip())
    name = safe(comparison.file) if comparison.file else "the baseline"
    return f"Baseline: {name}" + (f" ({', '.join(about)})" if about else "")
