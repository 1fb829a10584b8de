"""Planning a run: how many runs each test gets, by which plan, and the run directory's header.

A test's runs are worked out from ``--runs`` and the test's own count or adaptive plan, unless
the plan is given: a resumed run goes on with its directory's plan, and a cluster worker makes
the runs ATP planned (:meth:`RunPlan.follow`). The header of a new run directory lists every
selected test as planned (this shard's only, with ``--shard``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from atp.core.adaptive import Adaptive
from atp.core.config import ResolvedAgent
from atp.core.options import RunOptions
from atp.core.results import BaselineRef, Budget, PlannedTest, RunHeader, new_run_id, utcnow
from atp.core.suite import Suite, Test, suite_fingerprint, test_fingerprint

__all__ = ["RunPlan", "new_header"]


class RunPlan:
    """The runs of each test: their count, adaptive plan and skip."""

    def __init__(self, runs: int | Literal["auto"] | None) -> None:
        self.runs = runs
        self.planned: dict[str, PlannedTest] = {}
        """Each test's plan as written in the run's header."""
        self.given = False
        """Whether the plan was given (a resumed run's, or ATP's for a worker) rather than
        worked out from the tests."""

    def follow(self, planned: Iterable[PlannedTest]) -> None:
        """Make the tests' runs, adaptive plans and skips those of ``planned``."""
        self.planned = {p.id: p for p in planned}
        self.given = True

    def plan_of(self, test: Test) -> Adaptive | None:
        """The test's adaptive plan, when it runs by one (its own ``auto``, or ``--runs=auto``)."""
        if self.given:
            return self.planned[test.id].adaptive
        if self.runs == "auto" or (self.runs is None and test.auto):
            return test.adaptive
        return None

    def skip_of(self, test: Test) -> str | None:
        """Why the test is not run: the suite's ``skip`` (a resumed run's, as it planned it)."""
        if self.given:
            return self.planned[test.id].skip
        return test.skip

    def runs_of(self, test: Test) -> int:
        """The runs planned for a test (under an adaptive plan, the most it may take)."""
        if self.given:
            return self.planned[test.id].runs
        plan = self.plan_of(test)
        if plan is not None:
            return plan.max_runs
        return self.runs if isinstance(self.runs, int) else test.runs

    def runs_left(self, test: Test, done: int) -> int:
        """How many runs a test still needs, ``done`` of them made (an adaptive test: at most)."""
        planned = self.planned[test.id]
        return (planned.runs if self.plan_of(test) is not None else len(planned.share())) - done

    def planned_test(self, test: Test, options: RunOptions) -> PlannedTest:
        """A selected test as this run plans it."""
        share = options.shares.get(test.id) if options.shares is not None else None
        return PlannedTest(
            id=test.id,
            name=test.name,
            description=test.description,
            tags=list(test.tags),
            runs=self.runs_of(test),
            skip=test.skip,
            pass_rule=test.pass_rule,
            adaptive=self.plan_of(test),
            fingerprint=test_fingerprint(test),
            quarantined=test.id in options.quarantine,
            run_numbers=share,
        )


def new_header(
    suite: Suite,
    agent: ResolvedAgent,
    selection: list[Test],
    plan: RunPlan,
    options: RunOptions,
    *,
    baseline: BaselineRef | None,
    budget: Budget | None,
) -> tuple[RunHeader, list[Test]]:
    """The header of a new run directory, and the tests it runs: the selection (this shard's
    share of it, with ``--shard``) as planned now."""
    fingerprint = suite_fingerprint(selection)  # of the whole selection, a shard's too
    tests = selection if options.shares is None else [t for t in selection if t.id in options.shares]
    header = RunHeader(
        run_id=new_run_id(),
        suite=suite.name,
        suite_file=str(suite.path) if suite.path else None,
        agent=agent.name,
        agent_type=agent.type,
        started_at=utcnow(),
        deselected=options.deselected,
        tests=[plan.planned_test(t, options) for t in tests],
        suite_fingerprint=fingerprint,
        baseline=baseline,
        shard=options.shard,
        budget=budget,
    )
    return header, tests
