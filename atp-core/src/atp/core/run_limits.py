"""The limits of a task held to while its agent runs (REQ-032: "forcibly stop the agent when
limits are exceeded").

A run ends at its time limit; it also ends as soon as its events show that the agent passed one
of the task's other constraints: a ``progress`` event's ``current_step`` beyond
``constraints.max_steps``, the ``llm_request`` events' tokens (input and output) adding up to more
than ``constraints.max_tokens``, or their ``cost_usd`` to more than ``constraints.budget_usd``.
ATP then stops the agent as it does at the time limit (its process, container or connection
ended, an in-process agent cancelled), keeps the events that came so far, and fails the run with
the limit's code (``MAX_STEPS_EXCEEDED``, ``MAX_TOKENS_EXCEEDED``, ``BUDGET_EXCEEDED``) and a reason
naming the limit and what the agent reached. This holds for every adapter whose agent sends
events while it works; figures that only come in the final response are scored, not enforced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

from atp.core.error_codes import BUDGET_EXCEEDED, MAX_STEPS_EXCEEDED, MAX_TOKENS_EXCEEDED
from atp.core.protocol import Constraints
from atp.core.trace import TraceSummary


class Passed:
    """A limit the agent passed: its code, and the reason the run fails with."""

    __slots__ = ("code", "reason")

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason


class RunLimits:
    """A run's ``max_steps``, ``max_tokens`` and ``budget_usd``, held against its trace's
    summary each time events arrive (:meth:`atp.core.trace.RunTrace.watch`); the first one
    passed is kept in :attr:`passed` and ``stop`` is called, once."""

    __slots__ = ("_stop", "budget_usd", "max_steps", "max_tokens", "passed")

    def __init__(self, constraints: Constraints, stop: Callable[[], None]) -> None:
        self.max_steps = constraints.max_steps
        self.max_tokens = constraints.max_tokens
        self.budget_usd = constraints.budget_usd
        self.passed: Passed | None = None
        self._stop = stop

    @staticmethod
    def wanted(constraints: Constraints) -> bool:
        """Whether ``constraints`` has a limit to hold while the agent runs."""
        return not (
            constraints.max_steps is None
            and constraints.max_tokens is None
            and constraints.budget_usd is None
        )

    @classmethod
    def of(cls, constraints: Constraints, stop: Callable[[], None]) -> RunLimits | None:
        """The limits of ``constraints``, or ``None`` when it has none of them."""
        return cls(constraints, stop) if cls.wanted(constraints) else None

    def __call__(self, summary: TraceSummary) -> None:
        if self.passed is not None:
            return
        passed = self.check(summary)
        if passed is not None:
            self.passed = passed
            self._stop()

    def check(self, summary: TraceSummary) -> Passed | None:
        """The first limit ``summary`` shows passed, or ``None``."""
        if self.max_steps is not None and summary.max_step > self.max_steps:
            return Passed(
                MAX_STEPS_EXCEEDED,
                f"the agent passed constraints.max_steps: it reached step {summary.max_step} "
                f"of at most {self.max_steps}, and ATP stopped it",
            )
        tokens = summary.input_tokens + summary.output_tokens
        if self.max_tokens is not None and tokens > self.max_tokens:
            return Passed(
                MAX_TOKENS_EXCEEDED,
                f"the agent passed constraints.max_tokens: its LLM calls used {tokens} tokens "
                f"of at most {self.max_tokens}, and ATP stopped it",
            )
        if self.budget_usd is not None and summary.cost_usd > self.budget_usd:
            return Passed(
                BUDGET_EXCEEDED,
                f"the agent passed constraints.budget_usd: its LLM calls cost ${summary.cost_usd:.6g} "
                f"of at most ${self.budget_usd:g}, and ATP stopped it",
            )
        return None


def canceller(scope: anyio.CancelScope) -> Callable[[], None]:
    """A function that cancels ``scope`` from any thread: at once on the event loop's thread
    (where adapters hand ATP their events), through the loop from another."""
    token = anyio.lowlevel.current_token()
    loop_thread = threading.get_ident()

    def cancel() -> None:
        if threading.get_ident() == loop_thread:
            scope.cancel()
        else:
            anyio.from_thread.run_sync(scope.cancel, token=token)

    return cancel
