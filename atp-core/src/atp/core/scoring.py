"""The composite 0-100 score of a run (design section 7.3).

    score = 100 × Σ(weight_i × component_i) / Σ(weight_i)   over the components that apply

- quality: the mean score of the quality checks (those about what the agent produced);
- completeness: passed checks / all checks;
- efficiency: steps against ``constraints.max_steps`` (1.0 up to ``scoring.optimal_steps``,
  falling linearly to 0.0 at ``max_steps``; without ``optimal_steps``, ``1 - steps/max_steps``);
- cost: ``1 - log(1 + tokens/max_tokens) / log(2)`` against ``constraints.max_tokens``, or the
  same of ``cost_usd`` against ``constraints.budget_usd``.

A component applies only when its inputs are known (checks exist, a limit and a measurement are
both there); the weights of those that apply are renormalised. A run with nothing to score
scores 100 when it completed. A run whose agent did not complete (failed, timeout, cancelled)
scores 0, unless that is the answer its test expects (``expect:``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from atp.core.protocol import ATPResponse, Constraints
from atp.core.results import Check
from atp.core.suite import ScoringWeights
from atp.core.trace import TraceSummary

SCORED_STATUSES = ("completed", "partial")


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def efficiency(steps: int, max_steps: int, optimal_steps: int | None = None) -> float:
    if optimal_steps is not None and optimal_steps < max_steps:
        if steps <= optimal_steps:
            return 1.0
        return _clamp(1.0 - (steps - optimal_steps) / (max_steps - optimal_steps))
    return _clamp(1.0 - steps / max_steps)


def cost(used: float, limit: float) -> float:
    if limit <= 0:
        return 0.0 if used > 0 else 1.0
    used = max(used, 0.0)
    return _clamp(1.0 - math.log(1.0 + used / limit) / math.log(2.0))


def components(
    checks: Sequence[Check],
    quality_checks: Sequence[Check],
    response: ATPResponse,
    trace: TraceSummary,
    constraints: Constraints,
    weights: ScoringWeights,
) -> dict[str, float]:
    """The score components that apply to this run, each 0-1 (skipped checks left out)."""
    checks = [c for c in checks if c.skipped is None]
    quality_checks = [c for c in quality_checks if c.skipped is None]
    parts: dict[str, float] = {}
    if quality_checks:
        parts["quality"] = sum(c.score for c in quality_checks) / len(quality_checks)
    if checks:
        parts["completeness"] = sum(c.passed for c in checks) / len(checks)
    metrics = response.metrics
    steps = max(metrics.total_steps or 0, trace.max_step)
    if constraints.max_steps and (metrics.total_steps is not None or trace.max_step):
        parts["efficiency"] = efficiency(steps, constraints.max_steps, weights.optimal_steps)
    tokens = metrics.total_tokens
    if tokens is None and (metrics.input_tokens is not None or metrics.output_tokens is not None):
        tokens = (metrics.input_tokens or 0) + (metrics.output_tokens or 0)
    if tokens is None and (trace.input_tokens or trace.output_tokens):
        tokens = trace.input_tokens + trace.output_tokens
    if constraints.max_tokens and tokens is not None:
        parts["cost"] = cost(tokens, constraints.max_tokens)
    elif constraints.budget_usd is not None and metrics.cost_usd is not None:
        parts["cost"] = cost(metrics.cost_usd, constraints.budget_usd)
    return parts


def composite(parts: dict[str, float], weights: ScoringWeights) -> float:
    """The weighted 0-100 score of the components present."""
    table = {
        "quality": weights.quality_weight,
        "completeness": weights.completeness_weight,
        "efficiency": weights.efficiency_weight,
        "cost": weights.cost_weight,
    }
    total = sum(table[name] for name in parts)
    if not parts or total <= 0:
        return 100.0
    return round(100.0 * sum(table[name] * value for name, value in parts.items()) / total, 4)


def score_run(
    checks: Sequence[Check],
    quality_checks: Sequence[Check],
    response: ATPResponse,
    trace: TraceSummary,
    constraints: Constraints,
    weights: ScoringWeights,
    *,
    expected: bool = False,
) -> tuple[float, dict[str, float]]:
    """The run's score and its breakdown by component; ``expected``: the agent's status is the
    one the test expects (``expect:``), and is scored as a completed run's."""
    parts = components(checks, quality_checks, response, trace, constraints, weights)
    parts = {name: value for name, value in parts.items() if math.isfinite(value)}
    if response.status not in SCORED_STATUSES and not expected:
        return 0.0, parts
    score = composite(parts, weights)
    return (score if math.isfinite(score) else 0.0), parts
