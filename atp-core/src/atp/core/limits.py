"""What an ``atp test`` may spend, and how fast it may start runs.

A budget (``budget: {max_cost_usd, max_tokens}`` in the config, ``--max-cost-usd`` and
``--max-tokens``) adds up what each finished run cost: the cost and tokens the agent reported
(or its events showed) and what the evaluators spent checking it (an LLM judge's calls). Once a
limit is reached no run starts; the runs in flight finish, and the runs left are not made, with
the reason ``BUDGET_EXCEEDED``.

A rate limit (an agent's ``rate_limit: 10/s``, ``30/min`` or ``2/h``; a number is per second)
spaces the starts of its runs (retries included) evenly, whatever ``--parallel`` says.
"""

from __future__ import annotations

import math
import re

import anyio
import msgspec

from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.errors import ConfigError
from atp.core.results import Budget, RunResult, run_metrics

_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*/\s*([a-z]+)\s*\Z")
_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
}  # fmt: skip

MAX_RATE = 1_000_000
"""The most runs a rate limit may allow in its unit of time."""

MAX_SPENT = float(MAX_COUNT)
"""What a budget counts up to, at most; also what one figure out of bounds counts as (an agent
may report any cost, a judge any usage)."""


def spent(value: object) -> float:
    """One figure a run spent (a cost, a count of tokens), as a budget counts it: ``None`` is
    nothing; a number out of 0..:data:`MAX_SPENT` (negative, NaN, infinite, absurd, not a
    number) is :data:`MAX_SPENT`, so that it exceeds any budget and never cancels what was
    spent."""
    if value is None:
        return 0.0
    number = number_in(value, 0, MAX_SPENT)
    return MAX_SPENT if number is None else number


class BudgetMeter:
    """Adds up what the finished runs spent against a :class:`~atp.core.results.Budget`."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    @property
    def exceeded(self) -> bool:
        return self.budget.exceeded is not None

    def spend(self, result: RunResult) -> None:
        """Count a finished run (every figure through :func:`spent`); the first time a limit is
        reached, say so in the budget."""
        budget = self.budget
        cost = spent(result.metrics.cost_usd)
        trace = result.trace  # an agent reporting fewer tokens than its events show spends those
        tokens = max(
            spent(run_metrics(result).get("total_tokens")),
            spent(trace.input_tokens) + spent(trace.output_tokens),
        )
        for usage in result.evaluation_usage.values():
            cost += spent(usage.cost_usd)
            tokens += spent(usage.input_tokens) + spent(usage.output_tokens)
        budget.spent_cost_usd = min(round(spent(budget.spent_cost_usd) + cost, 9), MAX_SPENT)
        budget.spent_tokens = int(min(spent(budget.spent_tokens) + tokens, MAX_SPENT))
        if budget.exceeded is not None:
            return
        if budget.max_cost_usd is not None and budget.spent_cost_usd >= budget.max_cost_usd:
            budget.exceeded = (
                f"max_cost_usd {budget.max_cost_usd:g} reached: ${budget.spent_cost_usd:.4f} spent"
            )
        elif budget.max_tokens is not None and budget.spent_tokens >= budget.max_tokens:
            budget.exceeded = f"max_tokens {budget.max_tokens} reached: {budget.spent_tokens} tokens spent"


class RateLimit(msgspec.Struct, frozen=True):
    """At most ``runs`` run starts every ``seconds``."""

    runs: float
    seconds: float

    @property
    def interval(self) -> float:
        return self.seconds / self.runs


def parse_rate_limit(value: object) -> RateLimit:
    """``10/s``, ``30/min``, ``2/hour`` or a number of runs per second; a ConfigError saying
    what is accepted otherwise."""
    runs: float | None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        runs, seconds = number_in(value, 0, MAX_RATE, low_open=True), 1.0
    elif isinstance(value, str) and (match := _RATE.match(value.lower())) and match.group(2) in _UNITS:
        runs, seconds = number_in(float(match.group(1)), 0, MAX_RATE, low_open=True), _UNITS[match.group(2)]
    else:
        raise ConfigError(
            f"'rate_limit' must be runs per second (a number) or like '10/s', '30/min' or '2/h', not {value!r}"
        )
    if runs is None:
        shown = repr(value) if isinstance(value, str) else shown_number(value)
        raise ConfigError(f"'rate_limit' must allow more than 0 and at most {MAX_RATE} runs, not {shown}")
    limit = RateLimit(runs=runs, seconds=seconds)
    if limit.interval > 3600:
        raise ConfigError(f"'rate_limit' must allow at least one run an hour, not {value!r}")
    return limit


class RateLimiter:
    """Spaces run starts ``limit.interval`` apart for every worker that shares it."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._next = -math.inf

    async def acquire(self) -> None:
        """Wait for this start's turn."""
        now = anyio.current_time()
        slot = max(now, self._next)
        self._next = slot + self.limit.interval
        if slot > now:
            await anyio.sleep(slot - now)
