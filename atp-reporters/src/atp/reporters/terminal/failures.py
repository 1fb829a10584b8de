"""A test's failures as the default report shows them, folded and grouped.

Each distinct failure is shown once, with the runs it happened in; when the agent itself failed
(crashed, timed out, gave no response), the checks that failed only because it produced no
artifacts are folded into one line; a run that did not pass lists its retries.
"""

from __future__ import annotations

import re

from atp.core.error_codes import words
from atp.core.results import Check, RunResult, TestResult
from atp.core.text import printable as safe
from atp.core.text import shown
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import PREVIEW_CHARS, plural, waited, which_runs

# How evaluators say there was nothing to check: ATP's own ("the agent produced no
# artifacts") and the usual wording of others ("no artifact 'report.md'").
_NO_ARTIFACTS = re.compile(r"\bno artifacts?\b", re.IGNORECASE)

_STATUS_PHRASE = {"timeout": "timed out", "cancelled": "was cancelled", "partial": "stopped part way"}


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


def run_failures(run: RunResult) -> list[tuple[tuple[str, ...], str]]:
    """What went wrong in one run, each with a key that is equal for the same failure in
    another run: the agent's error first, then the checks (follow-ons folded)."""
    items: list[tuple[tuple[str, ...], str]] = []
    if run.outcome == "passed":
        return items
    if run.error:
        said = f"{safe(run.status)}{safe(words(run.error_code, run.status))}: {safe(run.error)}"
        items.append((("error", run.status, run.error_code or "", run.error), said))
    failed = run.failed_checks
    follow_on = follow_on_checks(run)
    if len(follow_on) > 1:
        names = ", ".join(c.name for c in follow_on)
        text = (
            f"{plural(len(follow_on), 'check')} not met: the agent {_STATUS_PHRASE.get(run.status, 'failed')} "
            f"and produced no artifacts ({shown(names, limit=PREVIEW_CHARS)})"
        )
        items.append((("folded", run.status, names), text))
        folded = {id(c) for c in follow_on}
        failed = [c for c in failed if id(c) not in folded]
    for item in failed:
        items.append((("check", item.name, item.message), f"{safe(item.name)}: {safe(item.message)}"))
    return items


def failure_lines(test: TestResult, style: Style) -> list[str]:
    """Each distinct failure of a test once, with the runs it happened in when it has several."""
    groups: dict[tuple[str, ...], tuple[str, list[int]]] = {}
    for run in test.runs:
        for key, text in run_failures(run):
            groups.setdefault(key, (text, []))[1].append(run.run_number)
    many = len(test.runs) > 1
    lines = []
    for text, numbers in groups.values():
        prefix = f"{which_runs(numbers)}: " if many else ""
        lines.append(style.paint(f"    - {prefix}{text}", "red"))
    for run in test.runs:
        if run.outcome != "passed":
            lines.extend(retry_lines(run, f"run {run.run_number}: " if many else "", style))
    return lines


def retry_lines(run: RunResult, prefix: str, style: Style) -> list[str]:
    """The attempts of a run that met a fault of the infrastructure and were made again:
    ``retried: attempt 1 on <where>: <reason> (waited 0.5 s)``."""
    lines = []
    for retry in run.retries:
        where = f" on {shown(retry.where, limit=PREVIEW_CHARS)}" if retry.where else ""
        text = (
            f"    ~ {prefix}retried: attempt {retry.attempt}{where}: "
            f"{shown(retry.reason, limit=PREVIEW_CHARS)} (waited {waited(retry.waited_seconds)})"
        )
        lines.append(style.paint(text, "yellow"))
    return lines
