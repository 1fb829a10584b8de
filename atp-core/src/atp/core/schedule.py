"""Which run comes next: the schedule the runner's workers take their runs from, and the count
of each test's runs still to finish.

:class:`Schedule` hands out the runs to make in suite order: a fixed test's runs all at once
(made as they are taken: a list would hold a pair per run), an adaptive test's first
``min_runs``, then one more for each finished run until its plan decides to stop. A worker that
finds nothing to take while adaptive runs are in flight waits for their decisions.
:class:`Progress` counts each test's runs still to finish, so that a test is reported finished
(``atp_test_finished``) with its last run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Protocol

import anyio

from atp.core.adaptive import Adaptive, decide, replay
from atp.core.baseline import Baseline, sequential_alpha
from atp.core.limits import BudgetMeter
from atp.core.plan import RunPlan
from atp.core.results import BaselineRef, RunResult
from atp.core.stats import Running, Sample
from atp.core.suite import Test

__all__ = ["AdaptiveState", "Progress", "Schedule", "Takes"]


class Takes(Protocol):
    """What a runner's workers take their runs from."""

    async def take(self) -> tuple[Test, int] | None:
        """The next run to make (a test and its run number), or ``None`` when there is none."""
        ...


class Progress:
    """Each test's runs still to finish; with ``keep``, the finished runs of the tests not yet
    finished (for ``atp_test_finished``)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.remaining: dict[str, int] = {}
        self._runs: dict[str, list[RunResult]] = {}

    def expect(self, test_id: str, left: int, done: list[RunResult]) -> None:
        """``left`` runs of the test are still to finish; ``done`` finished before (a resume)."""
        self.remaining[test_id] = left
        if done and self.keep:
            self._runs[test_id] = list(done)

    def stop_after(self, test_id: str, left: int) -> None:
        """An adaptive test decided: only the runs in flight (``left``) are still to finish."""
        if test_id in self.remaining:
            self.remaining[test_id] = left

    def finished(self, result: RunResult) -> list[RunResult] | None:
        """Count a finished run; the test's runs when it was its last (kept ones only with
        ``keep``), else ``None``."""
        left = self.remaining.get(result.test_id)
        if left is None:
            return None
        if self.keep:
            self._runs.setdefault(result.test_id, []).append(result)
        if left > 1:
            self.remaining[result.test_id] = left - 1
            return None
        del self.remaining[result.test_id]
        return self._runs.pop(result.test_id, [])

    def clear(self) -> None:
        self.remaining, self._runs = {}, {}


class AdaptiveState:
    """An adaptive test's runs so far."""

    __slots__ = (
        "_free",
        "baseline",
        "finished",
        "numbers",
        "plan",
        "running",
        "sample",
        "started",
        "stopped",
    )

    def __init__(self, plan: Adaptive, baseline: Sample | None) -> None:
        self.plan = plan
        self.baseline = baseline
        self.running = Running()
        self.started = 0
        self.finished = 0
        self.stopped = False
        self.sample: Sample | None = None
        self.numbers: set[int] = set()
        """The run numbers taken (a resumed run's may have gaps: runs cut short)."""
        self._free = 1

    def number(self) -> int:
        """The next run's number: the smallest not taken."""
        while self._free in self.numbers:
            self._free += 1
        self.numbers.add(self._free)
        return self._free

    def replay(self, done: list[RunResult], alpha: float) -> None:
        """Count a resumed run's finished runs, in stored order, and decide at the same look
        as when they ran (the runs in flight came after)."""
        scores = []
        for run in done:
            self.sample = self.running.add(run.score)
            self.numbers.add(run.run_number)
            scores.append(run.score)
        self.started = self.finished = len(self.numbers)
        if scores and (
            self.started >= self.plan.max_runs or replay(self.plan, scores, self.baseline, alpha) is not None
        ):
            self.stopped = True


class Schedule:
    """The runs to make, in suite order, handed to workers as they ask (see the module)."""

    def __init__(
        self,
        plan: RunPlan,
        tests: list[Test],
        baseline: tuple[Baseline | None, BaselineRef | None, str],
        budget: BudgetMeter | None,
        progress: Progress,
        done: Mapping[str, list[RunResult]] | None = None,
    ) -> None:
        """``baseline``: the baseline, how it is compared, and the suite's name (a baseline of
        another suite is none)."""
        self._plan = plan
        self._budget = budget
        self._progress = progress
        self._done = done or {}
        self._adaptive: dict[str, AdaptiveState] = {}
        known, reference, suite = baseline
        entries = known.tests if known is not None and known.suite == suite else {}
        adaptive = [t for t in tests if plan.plan_of(t) is not None and plan.skip_of(t) is None]
        self.alpha = sequential_alpha(
            sum(1 for test in adaptive if test.id in entries),
            reference.correction if reference is not None else "holm",
        )
        for test in adaptive:
            test_plan = plan.plan_of(test)
            assert test_plan is not None
            entry = entries.get(test.id)
            state = self._adaptive[test.id] = AdaptiveState(
                test_plan, entry.sample() if entry is not None else None
            )
            state.replay(list(self._done.get(test.id, ())), self.alpha)
        self._base = self._first_runs(tests)
        self._more: deque[Test] = deque()
        self._in_flight = 0
        """Adaptive runs started whose decision is still to come."""
        self._changed: anyio.Event | None = None

    def _first_runs(self, tests: list[Test]) -> Iterator[tuple[Test, int | None]]:
        plan = self._plan
        for test in tests:
            if plan.skip_of(test) is not None:
                continue
            state = self._adaptive.get(test.id)
            if state is None:
                done = {run.run_number for run in self._done.get(test.id, ())}
                for number in plan.planned[test.id].share():
                    if number not in done:
                        yield test, number
                continue
            if state.stopped:
                continue
            for _ in range(max(state.plan.min_runs - state.started, 1)):
                yield test, None

    async def take(self) -> tuple[Test, int] | None:
        """The next run to make, or ``None`` when there will be no more."""
        while True:
            if self._budget is not None and self._budget.exceeded:
                return None
            if self._more:
                test = self._more.popleft()
                number: int | None = None
            else:
                item = next(self._base, None)
                if item is None:
                    if self._in_flight == 0:
                        return None
                    self._changed = self._changed or anyio.Event()
                    await self._changed.wait()
                    continue
                test, number = item
            if number is not None:
                return test, number
            state = self._adaptive[test.id]
            if state.stopped or state.started >= state.plan.max_runs:
                continue
            state.started += 1
            self._in_flight += 1
            return test, state.number()

    def decided(self, test_id: str) -> bool:
        """Whether an adaptive test needs no more runs (a resumed run's, decided before)."""
        state = self._adaptive.get(test_id)
        return state is not None and state.stopped

    def finished(self, test: Test, result: RunResult) -> None:
        """A run was stored: an adaptive test's plan decides whether it runs once more."""
        state = self._adaptive.get(test.id)
        if state is None:
            return
        state.finished += 1
        self._in_flight -= 1
        sample = state.running.add(result.score)
        if not state.stopped:
            stop = decide(state.plan, sample, state.baseline, self.alpha)
            if stop is not None:
                state.stopped = True  # the runs still in flight are the ones still to finish
                self._progress.stop_after(test.id, state.started - state.finished + 1)
            elif state.started + sum(1 for t in self._more if t.id == test.id) < state.plan.max_runs:
                self._more.append(test)
        if self._changed is not None:
            self._changed.set()
            self._changed = None
