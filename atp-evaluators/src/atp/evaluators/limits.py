"""Evaluators of what one run took: ``latency`` (its duration) and ``cost`` (dollars, tokens).

::

    - type: latency
      config: {max_seconds: 30}
    - type: cost
      config: {max_usd: 0.05, max_tokens: 20000}   # either, or both (a check each)

``latency`` holds the run's duration as ATP measured it (the result's ``duration_seconds``: from
sending the request to the response) against ``max_seconds``; outside ``atp test``, where ATP
measured nothing, the agent's ``metrics.wall_time_seconds``.

``cost`` holds what the run spent: the larger of what the agent reports (``metrics.cost_usd``;
``metrics.total_tokens``, or its ``input_tokens`` + ``output_tokens``) and what its trace's
``llm_request`` events add up to, so an agent cannot pass by reporting less than its events
show. A run that gives no figure at all (no metric, no ``llm_request`` event with one) has
nothing to hold against the limit: its check is skipped, saying so.

Both are per run; unlike ``constraints.max_tokens`` and ``constraints.budget_usd``, they do not
stop the agent, they check the run once it is over.
"""

from typing import Annotated

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check, skipped
from atp.core.protocol import MAX_METRIC
from atp.core.results import Check

__all__ = ["Cost", "CostConfig", "Latency", "LatencyConfig", "run_cost", "run_tokens"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_METRIC)]
Dollars = Annotated[float, msgspec.Meta(ge=0, le=MAX_METRIC)]
Tokens = Annotated[int, msgspec.Meta(ge=0, le=int(MAX_METRIC))]


class LatencyConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The run took at most ``max_seconds`` (ATP's measure, ``duration_seconds``)."""

    max_seconds: Seconds


class CostConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The run spent at most ``max_usd`` dollars and/or ``max_tokens`` LLM tokens (the larger of
    the agent's metrics and its trace's ``llm_request`` events)."""

    max_usd: Dollars | None = None
    max_tokens: Tokens | None = None

    def __post_init__(self) -> None:
        if self.max_usd is None and self.max_tokens is None:
            raise ValueError("cost needs 'max_usd', 'max_tokens' or both")


class Latency(Evaluator):
    name = "latency"
    summary = "the run took at most 'max_seconds' (ATP's measure of its duration)"
    category = "behavior"
    Config = LatencyConfig

    async def evaluate(self, ctx: EvalContext, config: LatencyConfig) -> list[Check]:
        seconds, source = ctx.duration, "ATP's measure, duration_seconds"
        if seconds is None:
            seconds, source = ctx.response.metrics.wall_time_seconds, "the agent's metrics.wall_time_seconds"
        if seconds is None:
            return [
                skipped(
                    self.name,
                    "ATP measured no duration of this run (outside atp test) and the agent reported "
                    "no metrics.wall_time_seconds",
                )
            ]
        limit = config.max_seconds
        if seconds <= limit:
            return [check(self.name, True, f"took {seconds:.3g} s (at most {limit:g} s; {source})")]
        return [
            check(
                self.name,
                False,
                f"expected at most {limit:g} s; the run took {seconds:.3g} s ({source})",
                expected=limit,
                actual=round(seconds, 6),
            )
        ]


def run_tokens(ctx: EvalContext) -> tuple[int | None, int | None]:
    """The run's LLM tokens: as the agent reports them, and as its ``llm_request`` events add
    up (``None``: no figure)."""
    metrics = ctx.response.metrics
    reported = metrics.total_tokens
    if reported is None and (metrics.input_tokens is not None or metrics.output_tokens is not None):
        reported = (metrics.input_tokens or 0) + (metrics.output_tokens or 0)
    summary = ctx.trace.summary
    traced = summary.input_tokens + summary.output_tokens if summary.llm_calls else None
    return reported, traced


def run_cost(ctx: EvalContext) -> tuple[float | None, float | None]:
    """The run's cost in dollars: as the agent reports it, and as its ``llm_request`` events
    add up (``None``: no figure; events that give no ``cost_usd`` are none)."""
    summary = ctx.trace.summary
    return ctx.response.metrics.cost_usd, summary.cost_usd if summary.cost_usd > 0 else None


def _figures(reported: float | None, traced: float | None, metric: str, shown: str) -> str:
    parts = []
    if reported is not None:
        parts.append(f"the agent's metrics.{metric}: {shown.format(reported)}")
    if traced is not None:
        parts.append(f"its llm_request events: {shown.format(traced)}")
    return "; ".join(parts)


def _limit_check(
    name: str, figures: tuple[float | None, float | None], limit: float, what: tuple[str, str, str]
) -> Check:
    """``what``: the metric's name, the format of a figure, and what it is in words."""
    metric, shown, words = what
    reported, traced = figures
    known = [value for value in figures if value is not None]
    if not known:
        return skipped(
            name,
            f"the run reported no {words}: no metrics.{metric} and no llm_request event with one; "
            "nothing to hold against the limit",
        )
    used = max(known)
    said = _figures(reported, traced, metric, shown)
    if used <= limit:
        return check(name, True, f"{shown.format(used)} (at most {shown.format(limit)}; {said})")
    return check(
        name,
        False,
        f"expected at most {shown.format(limit)}; the run used {shown.format(used)} ({said})",
        expected=limit,
        actual=used,
        reported=reported,
        traced=traced,
    )


class Cost(Evaluator):
    name = "cost"
    summary = "the run spent at most 'max_usd' dollars and/or 'max_tokens' tokens (metrics or trace)"
    category = "behavior"
    Config = CostConfig

    async def evaluate(self, ctx: EvalContext, config: CostConfig) -> list[Check]:
        checks = []
        if config.max_usd is not None:
            figures = run_cost(ctx)
            what = ("cost_usd", "${:.6g}", "cost")
            checks.append(_limit_check("cost:usd", figures, config.max_usd, what))
        if config.max_tokens is not None:
            tokens = run_tokens(ctx)
            what = ("total_tokens", "{:,.0f} tokens", "tokens")
            checks.append(_limit_check("cost:tokens", tokens, config.max_tokens, what))
        return checks
