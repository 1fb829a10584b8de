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

from atp.core.bounds import number_in
from atp.core.errors import ConfigError
from atp.core.results import Budget, RunResult, run_metrics

_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*/\s*([a-z]+)\s*\Z")
_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
}  # fmt: skip


MAX_SPENT = 1e15
"""What a budget counts up to, at most (an agent may report any cost)."""


class BudgetMeter:
    """Adds up what the finished runs spent against a :class:`~atp.core.results.Budget`."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    @property
    def exceeded(self) -> bool:
        return self.budget.exceeded is not None

    def spend(self, result: RunResult) -> None:
        """Count a finished run; the first time a limit is reached, say so in the budget."""
        budget = self.budget
        cost = result.metrics.cost_usd or 0.0
        trace = result.trace  # an agent reporting fewer tokens than its events show spends those
        tokens = max(
            run_metrics(result).get("total_tokens", 0.0), float(trace.input_tokens + trace.output_tokens)
        )
        for usage in result.evaluation_usage.values():
            cost += usage.cost_usd or 0.0
            tokens += usage.input_tokens + usage.output_tokens
        if number_in(cost, 0, low_open=True) is not None:
            budget.spent_cost_usd = min(round(budget.spent_cost_usd + cost, 9), MAX_SPENT)
        if number_in(tokens, 0, low_open=True) is not None:
            budget.spent_tokens = int(min(budget.spent_tokens + tokens, MAX_SPENT))
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
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        runs, seconds = float(value), 1.0
    elif isinstance(value, str) and (match := _RATE.match(value.lower())) and match.group(2) in _UNITS:
        runs, seconds = float(match.group(1)), _UNITS[match.group(2)]
    else:
        raise ConfigError(
            f"'rate_limit' must be runs per second (a number) or like '10/s', '30/min' or '2/h', not {value!r}"
        )
    if not (math.isfinite(runs) and 0 < runs <= 1_000_000):
        raise ConfigError(f"'rate_limit' must allow more than 0 and at most 1000000 runs, not {value!r}")
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
