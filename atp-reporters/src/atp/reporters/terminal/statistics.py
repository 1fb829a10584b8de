"""The statistics sections of the console report, every figure the kernel's.

Per test (``--verbose``): the score's 95% interval, median, range and CV; the means of the score
components (and which did not count) and of the metrics; pass@k and pass^k. For the suite, when
tests ran several runs: its pass@1 and pass^k, and the tests whose score is unstable. A figure
that is undefined is shown as ``—``, never as NaN.
"""

from __future__ import annotations

from atp.core.bounds import number_in
from atp.core.results import METRIC_NAMES, SuiteResults, TestResult
from atp.core.stats import Stability, stability_word
from atp.core.text import printable as safe
from atp.reporters.terminal.style import Style
from atp.reporters.terminal.words import id_list, plural, seconds

COMPONENTS = ("quality", "completeness", "efficiency", "cost")
_NOT_COUNTED = {
    "quality": "no quality checks",
    "completeness": "no checks",
    "efficiency": "no max_steps, or steps unknown",
    "cost": "no token or cost limit, or usage unknown",
}
"""Why a score component did not count in any run: the conditions under which it counts
(docs/statistics.md), as the reporter cannot tell which of them was missing."""


def statistics_lines(test: TestResult, style: Style) -> list[str]:
    """The test's statistics as the kernel took them: the score's interval, median, range
    and CV; the components' and metrics' means; pass@k and pass^k."""
    stats = test.statistics
    if stats is None:
        return []
    lines = []
    score = stats.score
    if score.n > 1:
        cv = f"CV {style.number(score.cv, '.2f')}"
        if score.stability is not None:
            cv += f" ({stability_word(score.stability)})"
        lines.append(
            f"score: 95% CI {style.interval(score.ci_95)}, median {style.number(score.median)}, "
            f"min {style.number(score.min)}, max {style.number(score.max)}, {cv}"
        )
    if test.pass_rule.rule != "all":
        lines.append(f"pass rule: {safe(test.pass_rule.describe())}")
    counted = []
    for name, component in stats.components.items():
        text = f"{safe(name)} {style.number(component.mean, '.2f')}"
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
        metric_text(name, stats.metrics[name].mean, style) for name in METRIC_NAMES if name in stats.metrics
    ]
    if metrics:
        lines.append(f"metrics (mean): {', '.join(metrics)}")
    if stats.runs > 1 and stats.pass_at_k:
        at_k = ", ".join(f"pass@{k} {style.number(v, '.2f')}" for k, v in sorted(stats.pass_at_k.items()))
        hat_k = ", ".join(
            f"pass^{k} {style.number(v, '.2f')}" for k, v in sorted(stats.pass_hat_k.items()) if k > 1
        )
        lines.append(f"{at_k}; {hat_k}" if hat_k else at_k)
    return [style.paint(style.text(f"    {line}"), "dim") for line in lines]


def metric_text(name: str, mean: float, style: Style) -> str:
    """A metric's mean over the runs, in its unit: ``1,234 tokens``, ``wall time 2.50s``."""
    value = number_in(mean)
    if value is None:
        return f"{name} {style.text('—')}"
    if name == "total_tokens":
        return f"{value:,.0f} tokens"
    if name == "total_steps":
        return f"{value:,.1f} steps"
    if name == "tool_calls":
        return f"{value:,.1f} tool calls"
    if name == "llm_calls":
        return f"{value:,.1f} LLM calls"
    if name == "wall_time_seconds":
        return f"wall time {seconds(value)}"
    if name == "cost_usd":
        return f"cost ${value:.4f}"
    return f"{safe(name)} {value:g}"


def suite_statistics_lines(results: SuiteResults, style: Style) -> list[str]:
    """When tests ran several runs: the suite's pass@1 and pass^k (for the largest k every
    test's runs allow) and the tests whose score is unstable."""
    stats = results.statistics
    if stats is None or not any(len(t.runs) > 1 for t in results.tests):
        return []
    lines = []
    ran = sum(1 for t in results.tests if t.statistics is not None)
    parts = []
    if 1 in stats.pass_at_k:
        parts.append(f"pass@1 {style.number(stats.pass_at_k[1], '.2f')}")
    ks = [k for k in stats.pass_hat_k if k > 1]
    if ks:
        k = max(ks)
        parts.append(f"pass^{k} {style.number(stats.pass_hat_k[k], '.2f')}")
    if parts:
        lines.append(f"Pass rates: {', '.join(parts)} (mean over {plural(ran, 'test')})")
    if stats.unstable:
        levels = {t.id: t.statistics.score.stability for t in results.tests if t.statistics is not None}
        unstable = [f"{safe(i)} ({_level(levels.get(i))})" for i in stats.unstable]
        lines.append(style.paint(f"Unstable: {id_list(unstable)}", "yellow"))
    return lines


def _level(level: Stability | None) -> str:
    return stability_word(level) if level is not None else "?"
