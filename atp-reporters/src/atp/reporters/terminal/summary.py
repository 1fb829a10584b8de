"""The end of the console report: the ``Summary:`` line and the lists under it.

Under the summary: the flaky tests, the quarantined ones, the runs that did not pass by their
error code, the retries, the budget (what was
spent of it and, when it stopped the run, the tests it left out) and the shard these results
are of; then the checks that were not made, by reason, and what the evaluators spent.
"""

from __future__ import annotations

from atp.core.results import BUDGET_EXCEEDED, Budget, Shard, SuiteResults
from atp.core.text import printable as safe
from atp.core.text import shown
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import PREVIEW_CHARS, id_list, plural, usd


def summary_line(results: SuiteResults, style: Style) -> str:
    """``Summary: X passed, Y failed, Z skipped`` (the quarantined counted apart), the pass
    rate, and what else happened to the run (deselected tests, an interruption, problems)."""
    s = results.summary
    held = {
        kind: sum(t.quarantined and t.status == kind for t in results.tests) for kind in ("failed", "error")
    }
    parts = [
        style.paint(f"{s.passed} passed", "green") if s.passed else f"{s.passed} passed",
        _counted(f"{s.failed} failed", s.failed, held["failed"], style),
        f"{s.skipped} skipped",
    ]
    if s.errors:
        parts.append(_counted(plural(s.errors, "error"), s.errors, held["error"], style))
    ran = s.total - s.skipped
    rate = f" ({100.0 * s.passed / ran:.1f}%)" if ran else ""
    extra = []
    if s.deselected:
        extra.append(f"{s.deselected} deselected")
    if results.interrupted:
        extra.append(style.paint("interrupted", "yellow"))
    if results.problems:
        extra.append(style.paint(f"{plural(len(results.problems), 'problem')} with the run directory", "red"))
    tail = f"; {', '.join(extra)}" if extra else ""
    return f"Summary: {', '.join(parts)}{rate}{tail}"


def _counted(text: str, count: int, quarantined: int, style: Style) -> str:
    """A count of failed (or errored) tests, saying how many of them are quarantined: those
    do not fail the run."""
    if not count:
        return text
    if not quarantined:
        return style.paint(text, "red")
    which = "quarantined" if quarantined == count else f"{quarantined} quarantined"
    return style.paint(f"{text} ({which}, not failing the run)", "red" if quarantined < count else "yellow")


def reliability_lines(results: SuiteResults, style: Style) -> list[str]:
    """Under the summary: the flaky tests, the quarantined ones with their statuses, the error
    codes of the runs that did not pass, the retries, the budget and the shard."""
    lines = []
    flaky = [safe(t.id) for t in results.tests if t.flaky]
    if flaky:
        lines.append(
            style.paint(f"Flaky: {id_list(flaky)} (their runs disagree: some passed, some failed)", "yellow")
        )
    quarantined = [f"{safe(t.id)} ({t.status})" for t in results.tests if t.quarantined]
    if quarantined:
        note = "their failures are reported but do not fail the run"
        lines.append(style.paint(f"Quarantined: {id_list(quarantined)}; {note}", "yellow"))
    codes = results.summary.error_codes
    if codes:
        counted = ", ".join(f"{safe(code)} {count}" for code, count in codes.items())
        runs = sum(codes.values())
        lines.append(
            style.paint(f"Error codes: {counted} (of the {plural(runs, 'run')} that did not pass)", "red")
        )
    retried = [run for test in results.tests for run in test.runs if run.retries]
    if retried:
        total = sum(len(run.retries) for run in retried)
        lines.append(
            f"Retries: {total} over {plural(len(retried), 'run')} "
            "(attempts made again after faults of the infrastructure)"
        )
    if results.budget is not None:
        lines.extend(budget_lines(results, results.budget, style))
    if results.shard is not None:
        lines.append(shard_line(results.shard))
    return lines


def budget_lines(results: SuiteResults, budget: Budget, style: Style) -> list[str]:
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
        lines.append(style.paint(style.text(f"{line} — the suite is incomplete"), "red"))
    elif budget.exceeded:
        lines[0] += style.paint(f"; exceeded: {exceeded}", "yellow")
    return lines


def shard_line(shard: Shard) -> str:
    how = f"balanced by the durations of run {safe(shard.basis)}" if shard.basis else "shared by count"
    return f"Shard {shard.index} of {shard.count} ({how})"


def skipped_check_lines(results: SuiteResults, style: Style) -> list[str]:
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
        listing = shown(", ".join(names), limit=PREVIEW_CHARS)
        lines.append(style.paint(f"Skipped checks: {count} ({listing}): {safe(reason)}", "yellow"))
    return lines


def evaluation_usage_lines(results: SuiteResults) -> list[str]:
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
