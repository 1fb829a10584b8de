"""Everything about one run of a test (``--verbose``): the agent's error, the retries, every
check, the warnings, the score's breakdown and, for a run that did not pass, the response and
the end of the agent's log."""

from __future__ import annotations

import msgspec

from atp.core.error_codes import words
from atp.core.results import RunResult
from atp.core.text import printable as safe
from atp.core.text import shown
from atp.reporters.terminal.artifacts import response_lines
from atp.reporters.terminal.failures import retry_lines
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import plural


def run_lines(run: RunResult, prefix: str, style: Style) -> list[str]:
    """The run's lines, each starting with ``prefix`` (``run 2: `` when the test has several)."""
    lines: list[str] = []
    if run.error:
        color = "yellow" if run.outcome == "passed" else "red"
        said = f"{safe(run.status)}{safe(words(run.error_code, run.status))}: {safe(run.error)}"
        lines.append(style.paint(f"    - {prefix}{said}", color))
    if run.error_details:
        details = shown(msgspec.json.encode(run.error_details).decode())
        lines.append(style.paint(f"    {prefix}error details: {details}", "dim"))
    if run.trace_id:
        lines.append(style.paint(f"    {prefix}the agent's trace: {safe(run.trace_id)}", "dim"))
    lines.extend(retry_lines(run, prefix, style))
    for item in run.checks:
        if item.skipped is not None:
            text = f"    {style.symbols['skipped']} {prefix}{safe(item.name)}: skipped: {safe(item.skipped)}"
            lines.append(style.paint(text, "yellow"))
            continue
        mark = style.symbols["passed" if item.passed else "failed"]
        text = f"    {mark} {prefix}{safe(item.name)}: {safe(item.message)}"
        if item.score not in (0.0, 1.0):
            text += f" (score {item.score:.2f})"
        lines.append(style.paint(text, "dim" if item.passed else "red"))
    for warning in run.warnings:
        lines.append(style.paint(f"    ! {prefix}warning: {safe(warning)}", "yellow"))
    if run.score_breakdown:
        parts = ", ".join(f"{safe(k)} {v:.2f}" for k, v in run.score_breakdown.items())
        lines.append(style.paint(f"    {prefix}score {run.score:.1f}: {parts}", "dim"))
    if run.outcome != "passed":
        lines.extend(response_lines(run, prefix, style))
    if run.log_tail:
        lines.append(style.paint(f"    {prefix}agent log (last {plural(len(run.log_tail), 'line')}):", "dim"))
        lines.extend(style.paint(f"      | {safe(line)}", "dim") for line in run.log_tail)
    return lines
