"""Several runners at once, their runs interleaved: the runtime of ``atp compare``.

Each agent runs in a :class:`~atp.core.runner.Runner` of its own (so each has its own run
directory), all of them in one event loop. Their runs are *interleaved*: run k of a test goes to
every agent before any agent starts run k + 1, so that a drift in something the agents share (an
API, a model, the machine's load) hits them alike. The runners are paced through their public
seam (:class:`~atp.core.options.Pacing`), without changing them:

- a gate on each runner's schedule: an agent may take its j-th run only when every agent still
  running has taken its (j - 1)-th (every agent's schedule lists the same runs in the same order);
- one capacity limiter over every agent's runs, first come first served: ``parallel`` runs in
  flight at once in all; with ``parallel=1`` the agents take turns, run by run.

Ctrl-C (or SIGTERM) is watched once for all the runners: each stops its runs in flight, keeps
its finished results in its run directory and says so.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from typing import TYPE_CHECKING, Any

import anyio

from atp.core.options import Pacing
from atp.core.signals import watch_signals

if TYPE_CHECKING:
    from atp.core.results import SuiteResults
    from atp.core.runner import Interrupted, Runner
    from atp.core.schedule import Takes
    from atp.core.suite import Test

__all__ = ["Interleaved", "Outcome", "Pacer", "interleaving", "run_interleaved"]

logger = logging.getLogger("atp.runner")


class Pacer:
    """The gate that interleaves the agents' runs: no agent takes a run before every agent's
    adapter has started (or failed to), and an agent may take its j-th run only when every agent
    still taking runs has taken its (j - 1)-th. Made inside the event loop."""

    def __init__(self, keys: list[str]) -> None:
        self.taken = dict.fromkeys(keys, 0)
        self.active = set(keys)
        self.starting = set(keys)
        """The agents whose adapters are still starting."""
        self.released = False
        """Set on Ctrl-C: nobody waits any more (the runners are stopping)."""
        self._changed = anyio.Event()

    async def start(self, key: str) -> None:
        """``key``'s adapter started: wait until every agent's has."""
        self.starting.discard(key)
        self._notify()
        while self.starting and not self.released:
            await self._changed.wait()

    def _ahead(self, key: str) -> bool:
        mine = self.taken[key]
        return any(self.taken[other] < mine for other in self.active if other != key)

    async def turn(self, key: str) -> None:
        """Wait until ``key`` may take its next run."""
        while self._ahead(key) and not self.released:
            await self._changed.wait()

    def took(self, key: str) -> None:
        self.taken[key] += 1
        self._notify()

    def leave(self, key: str) -> None:
        """``key`` takes no more runs (or never started): nobody waits for it."""
        self.active.discard(key)
        self.starting.discard(key)
        self._notify()

    def release(self) -> None:
        self.released = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class _PacedSchedule:
    """A runner's schedule behind the :class:`Pacer`."""

    def __init__(self, schedule: Takes, pacer: Pacer, key: str) -> None:
        self._schedule = schedule
        self._pacer = pacer
        self._key = key

    async def take(self) -> tuple[Test, int] | None:
        await self._pacer.turn(self._key)
        # A fixed count's schedule hands its next run without waiting: nothing comes between
        # the gate's check and the count below.
        item = await self._schedule.take()
        if item is None:
            self._pacer.leave(self._key)
        else:
            self._pacer.took(self._key)
        return item


class _Interleaving(Pacing):
    """The pacing of every runner of one comparison, and their signals watched once: the first
    stops every runner's runs in flight; a second stops their agents at once, and any runner
    still starting."""

    watch_signals = False

    pacer: Pacer
    limiter: anyio.CapacityLimiter

    def __init__(self, runners: list[Runner], parallel: int) -> None:
        self.parallel = parallel
        self.signal_number: int | None = None
        self.running = list(runners)
        """The runners whose ``run`` has not returned."""
        self.ready_ones: list[Runner] = []
        self.everything: anyio.CancelScope | None = None

    async def ready(self, runner: Runner) -> None:
        self.ready_ones.append(runner)
        if self.signal_number is not None:
            runner.stop(self.signal_number)
        await self.pacer.start(runner.agent.name)

    def takes(self, runner: Runner, schedule: Takes) -> Takes:
        return _PacedSchedule(schedule, self.pacer, runner.agent.name)

    def slot(self, runner: Runner) -> contextlib.AbstractAsyncContextManager[Any]:
        return self.limiter

    def ended(self, runner: Runner) -> None:
        self.pacer.leave(runner.agent.name)
        with contextlib.suppress(ValueError):
            self.running.remove(runner)
        with contextlib.suppress(ValueError):
            self.ready_ones.remove(runner)

    def first(self, signal_number: int) -> None:
        self.signal_number = signal_number
        for runner in self.running:
            runner.stop(signal_number)
        self.pacer.release()

    def again(self, signal_number: int) -> None:
        logger.warning("stopping every agent at once (a second %s)", signal.Signals(signal_number).name)
        for runner in list(self.ready_ones):
            runner.abort()
        if any(runner not in self.ready_ones for runner in self.running) and self.everything is not None:
            self.everything.cancel()  # an adapter still starting


class Outcome:
    """How one agent's runner ended."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.results: SuiteResults | None = None
        self.interrupted: Interrupted | None = None
        self.error: BaseException | None = None


class Interleaved:
    """What :func:`run_interleaved` did: each agent's outcome, and the signal that stopped it."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        self.outcomes = outcomes
        self.signal_number: int | None = None


def interleaving(parallel: int) -> Pacing:
    """The pacing to give each runner of one comparison (:func:`run_interleaved` runs them):
    ``parallel`` runs in flight at once over all of them."""
    return _Interleaving([], parallel)


async def run_interleaved(runners: list[Runner], pacing: Pacing) -> Interleaved:
    """Run every runner at once, interleaved by ``pacing`` (:func:`interleaving`, given to each
    of them). An agent that cannot run (its adapter failed to start, its run directory failed)
    stops the others."""
    from atp.core.runner import Interrupted

    assert isinstance(pacing, _Interleaving)
    pacing.running = list(runners)
    pacing.pacer = Pacer([r.agent.name for r in runners])  # made inside the event loop
    pacing.limiter = anyio.CapacityLimiter(pacing.parallel)
    done = Interleaved([Outcome(r) for r in runners])

    async def run_agent(outcome: Outcome, scope: anyio.CancelScope) -> None:
        try:
            outcome.results = await outcome.runner.run()
        except Interrupted as stop:
            outcome.interrupted = stop
        except Exception as exc:
            outcome.error = exc
            scope.cancel()
        finally:
            pacing.ended(outcome.runner)

    async with anyio.create_task_group() as outer:
        async with anyio.create_task_group() as group:
            pacing.everything = group.cancel_scope
            outer.start_soon(watch_signals, pacing.first, pacing.again)
            for outcome in done.outcomes:
                group.start_soon(run_agent, outcome, group.cancel_scope)
        outer.cancel_scope.cancel()
    done.signal_number = pacing.signal_number
    return done
