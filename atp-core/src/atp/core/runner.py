"""The runner: every selected test, N times, through the agent's adapter, into the run directory.

A run of a suite goes through phases, each in a module of its own:

- planning (:mod:`atp.core.plan`): each test's runs, adaptive plan and skip, and the header of
  the run directory (or the plan of the directory it resumes, :mod:`atp.core.resume`);
- scheduling (:mod:`atp.core.schedule`): which run comes next, as ``parallel`` workers ask;
- one run (:mod:`atp.core.attempt`): the request executed through the adapter under the time
  limit (with the test's services around it, :mod:`atp.core.service_runs`), tried again after
  faults of the infrastructure, the response checked, evaluated (:mod:`atp.core.evaluation`)
  and scored; or made through an executor's workers (:mod:`atp.core.remote`);
- storing (:meth:`Runner.record`): each finished run appended to the run directory before
  anything else sees it, then the schedule, the budget, ``--fail-fast`` and the plugins told;
- finishing: the adapter, services and evaluators closed, the header written with how the run
  ended, the results read back from the directory.

An agent that times out, crashes, lies or floods fails its own run with a reason; the other runs
go on. Ctrl-C (or SIGTERM) stops the runs in flight, stops their agents, leaves every finished
result in the run directory and raises :class:`Interrupted`. Another caller paces the runs
through :class:`~atp.core.options.Pacing` (``atp compare``), never by overriding this class.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec

from atp.core.adapter import Adapter
from atp.core.attempt import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, Gate, NotStarted, RunMaker, build_request
from atp.core.config import ResolvedAgent
from atp.core.errors import AtpError, ExecutorLost, PluginFailed, StorageError, single_exception
from atp.core.evaluation import Evaluation
from atp.core.executor import Executor, Job
from atp.core.hooks import Notifier
from atp.core.ledger import ProcessLedger, activate, stop_abandoned
from atp.core.limits import BudgetMeter, RateLimiter
from atp.core.options import RunOptions, RunParts, RunSettings, split_settings
from atp.core.plan import RunPlan, new_header
from atp.core.plugins import Plugins, format_exception
from atp.core.protocol import ATPRequest
from atp.core.remote import RemoteRuns
from atp.core.results import (
    PluginFailure,
    RunHeader,
    RunResult,
    RunStore,
    SuiteResults,
    make_test_result,
    utcnow,
)
from atp.core.resume import reopen
from atp.core.retry import MAX_RETRIES
from atp.core.schedule import Progress, Schedule
from atp.core.secrets import Masker
from atp.core.service_runs import Services
from atp.core.stats import ALPHA
from atp.core.suite import Suite, Test, test_fingerprint
from atp.core.text import mask, masking, shorten
from atp.core.tree import remove_tree

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "FILES_BASE",
    "FILES_PER_RUN",
    "Interrupted",
    "Runner",
    "fit_parallel",
    "make_adapter",
    "start_adapter",
]

logger = logging.getLogger("atp.runner")

FILES_BASE = 64
"""Open files ATP itself may need besides its runs (plugins, the run directory, reporters)."""
FILES_PER_RUN = 10
"""Open files one run in flight may need: an agent's three pipes (both ends while it starts),
its pidfd, the events and log files."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT (Ctrl-C) or SIGTERM after its finished results were
    stored; ``signal_number`` says which."""

    def __init__(self, signal_number: int, directory: Path) -> None:
        self.signal_number = signal_number
        self.directory = directory
        name = signal.Signals(signal_number).name
        super().__init__(f"stopped by {name}; finished runs are kept in {directory}")


class Runner:
    """Runs the selected tests of a suite against one agent.

    ``options`` are the run's settings (:class:`~atp.core.options.RunOptions`) and ``parts``
    what it is made with besides (:class:`~atp.core.options.RunParts`); either may be given as
    keyword arguments instead, by their fields' names (``Runner(..., run_root=path, runs=3)``).
    """

    def __init__(
        self,
        plugins: Plugins,
        suite: Suite,
        tests: list[Test],
        agent: ResolvedAgent,
        options: RunOptions | None = None,
        parts: RunParts | None = None,
        **settings: Unpack[RunSettings],
    ) -> None:
        fields, objects = split_settings(settings)
        options = msgspec.structs.replace(options, **fields) if options is not None else RunOptions(**fields)
        parts = parts or RunParts(**objects)
        if options.parallel < 1:
            raise AtpError("--parallel must be at least 1")
        if not 0 <= options.retries <= MAX_RETRIES:
            raise AtpError(f"retries must be from 0 to {MAX_RETRIES}, not {options.retries}")
        self.plugins, self.suite, self.tests, self.agent = plugins, suite, tests, agent
        self.options = options
        masker = (parts.masker or Masker()).with_secrets(agent.secrets)  # the agent's, however built
        self.masker = masker if masker else None
        self.baseline = parts.baseline
        self.executor: Executor | None = parts.executor
        self.job: Job | None = parts.job
        """With ``executor``: what its workers load (the run id and tests are filled in at start)."""
        self.pacing = parts.pacing
        self.plan = RunPlan(options.runs)
        self.budget = (
            BudgetMeter(msgspec.structs.replace(options.budget)) if options.budget is not None else None
        )
        self.notify = Notifier(plugins.pm, self._hook_failed)
        self.services = Services(plugins, self._hook_failed, self.masker)
        self.evaluation = Evaluation(
            plugins, parts.evaluator_settings or (lambda name: {}), parts.secrets or {}, self._hook_failed
        )
        self.evaluation.suite_dir = suite.path.parent if suite.path is not None else None
        rate = RateLimiter(options.rate_limit) if options.rate_limit is not None else None
        self.maker = RunMaker(
            plugins,
            agent,
            options,
            self.masker,
            (self.services, self.evaluation, self.notify),
            Gate(rate, self.budget),
            self.build_request,
        )
        self.run_id = ""
        self.store: RunStore | None = None
        self.plugin_failures: list[PluginFailure] = []
        """Plugins that raised in a lifecycle hook (each plugin and hook once)."""
        self._failed_hooks: set[tuple[str, str]] = set()
        self._earlier_failures: list[PluginFailure] = []
        """A resumed run's plugin failures from before (kept with the new ones)."""
        self._progress = Progress(keep=False)
        self._schedule: Schedule | None = None
        self._runs_scope: anyio.CancelScope | None = None
        self._adapter: Adapter | None = None
        self._stopped_by: int | None = None
        self._failed_fast = False
        self._storage_error: StorageError | None = None
        self._executor_lost: str | None = None
        """Why the executor could make no more runs (its cluster was lost), once it could not."""
        self._executor_closed = False
        self._completed = False
        """Whether every worker came back (else the run was cut short, however)."""

    # --- the seams -----------------------------------------------------------------------

    def build_request(
        self, test: Test, run_number: int, workspace: Path | None = None, task_id: str | None = None
    ) -> ATPRequest:
        """The request of one run of ``test``."""
        where = (self.suite.name, self.run_id)
        return build_request(test, run_number, self.plan, where, workspace, task_id, self.agent.environment)

    def begin(self) -> None:
        """Get ready to make runs on the current event loop (:meth:`run` does; a cluster
        worker's session calls it before making runs with :attr:`maker`)."""
        self.notify.refresh()
        self.services.begin()

    async def end(self) -> None:
        """Close the services and evaluators the runs made, shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            if self.services:
                await self.services.aclose()
            if self.evaluation:
                await self.evaluation.aclose()

    def stop(self, signal_number: int) -> None:
        """What a first Ctrl-C or SIGTERM does: the runs in flight are stopped (their agents by
        the adapter), the finished ones are kept, and :meth:`run` raises :class:`Interrupted`."""
        if self._stopped_by is None:
            self._stopped_by = signal_number
        if self._runs_scope is not None:
            self._runs_scope.cancel()

    def abort(self) -> None:
        """What a second signal does: every agent stopped at once."""
        try:
            if self._adapter is not None:
                self._adapter.abort()
            if self.executor is not None:
                self.executor.abort()
        except Exception as exc:
            logger.warning("adapter %r could not abort its agents: %s", self.agent.type, exc)

    @property
    def running(self) -> bool:
        """Whether the runs have begun (its agent started) and not ended."""
        return self._runs_scope is not None

    # --- the suite -----------------------------------------------------------------------

    async def run(self) -> SuiteResults:
        """Run everything; returns the results as the run directory holds them."""
        self.begin()
        root = (
            Path(self.options.run_root) if self.options.resume is None else Path(self.options.resume).parent
        )
        for message in stop_abandoned(root):
            logger.warning(message)
        store, header, done = self._open()
        self.store, self.run_id = store, header.run_id
        self._progress = Progress(keep=self.notify.wants("atp_test_finished"))
        schedule = self._schedule = Schedule(
            self.plan,
            self.tests,
            (self.baseline, self.options.baseline_ref, self.suite.name),
            self.budget,
            self._progress,
            done,
        )
        total, resumed = 0, sum(map(len, done.values()))
        for test in self.tests:
            if self.plan.skip_of(test) is None and not schedule.decided(test.id):
                left = self.plan.runs_left(test, len(done.get(test.id, ())))
                if left > 0:
                    self._progress.expect(test.id, left, done.get(test.id, []))
                    total += left
        del done
        started = False
        try:
            processes = ProcessLedger.create(store.directory)
            # (the context variables are for third-party helpers only: ATP passes both on)
            with activate(processes), masking(self.masker):
                self.maker.processes = processes
                try:
                    await self._start(header, processes)
                    started = True
                    if self.options.resume is not None:
                        self.notify(
                            "atp_suite_resumed", header=header, directory=store.directory, done=resumed
                        )
                    self.notify("atp_suite_started", header=header, directory=store.directory)
                    await self._run_all(schedule, total)
                    self._completed = True
                finally:
                    await self._close()
        finally:
            results = self._ended(store, header, started)
        if self._storage_error is not None:
            raise StorageError(
                f"{self._storage_error}; the suite was stopped. The results written before are "
                f"kept in {store.directory} (atp report {store.directory})"
            )
        if self._stopped_by is not None:
            raise Interrupted(self._stopped_by, store.directory)
        assert results is not None
        return results

    def _open(self) -> tuple[RunStore, RunHeader, dict[str, list[RunResult]]]:
        """The run directory: a new one, or the one resumed (its plan followed)."""
        options = self.options
        if options.resume is None:
            budget = self.budget.budget if self.budget is not None else None
            baseline = options.baseline_ref if self.baseline is not None else None
            header, self.tests = new_header(
                self.suite, self.agent, self.tests, self.plan, options, baseline=baseline, budget=budget
            )
            self.plan.planned = {p.id: p for p in header.tests}
            return RunStore.create(Path(options.run_root), header, self.masker, self.baseline), header, {}
        reopened = reopen(
            Path(options.resume),
            self.suite,
            self.agent.name,
            self.masker,
            force=options.force,
            quarantine=options.quarantine,
        )
        for problem in reopened.store.problems:
            logger.warning(problem)
        self.tests = reopened.tests
        self.plan.follow(reopened.header.tests)
        self.maker.resuming = True
        self._earlier_failures = list(reopened.header.plugin_failures)
        if self.baseline is None:
            self.baseline = reopened.store.baseline()
        return reopened.store, reopened.header, reopened.done

    async def _start(self, header: RunHeader, processes: ProcessLedger) -> None:
        """Start the agent's adapter (or the executor); a resumed run's header is rewritten
        only once it started (a resume that cannot start leaves the directory as it was)."""
        if self.executor is not None:
            await self.executor.start(self._job(header))
        else:
            self._adapter = make_adapter(self.plugins, self.agent, self.masker)
            await start_adapter(self.plugins, self.agent, self._adapter, self.masker, processes)
        if self.options.resume is not None:
            assert self.store is not None
            header.resumed_at.append(utcnow())
            header.finished_at = None
            header.interrupted = False
            header.stopped_by = None
            header.budget = self.budget.budget if self.budget is not None else None
            self.store.write_header(header)

    def _job(self, header: RunHeader) -> Job:
        """What the executor's workers load to make this run's runs."""
        base = self.job or Job(suite_path=str(self.suite.path or ""), agent=self.agent.name)
        return msgspec.structs.replace(
            base,
            key=f"{header.run_id}-{os.urandom(4).hex()}",
            run_id=header.run_id,
            runs=self.options.runs,
            tests={t.id: test_fingerprint(t) for t in self.tests},
            plan=list(header.tests),
            options=self.options,
        )

    async def _close(self) -> None:
        """Release the adapter (or the executor), the services and the evaluators."""
        with anyio.CancelScope(shield=True):
            if self._adapter is not None:
                await self._close_adapter(self._adapter)
            if self.executor is not None:
                await self._close_executor(self.executor)
        await self.end()

    def _ended(self, store: RunStore, header: RunHeader, started: bool) -> SuiteResults | None:
        """Write how the run ended and read its results back (``None`` when they cannot be);
        when the agent could not start, nothing ran and no new run directory is left."""
        if not started:
            store.close()
            if self.options.resume is None:
                remove_tree(store.directory)
            return None
        header.finished_at = utcnow()
        header.interrupted = not self._completed or (
            self._stopped_by is not None or self._storage_error is not None or self._executor_lost is not None
        )
        header.stopped_by = self._stop_reason()
        header.plugin_failures = [*self._earlier_failures, *self.plugin_failures]
        try:
            store.write_header(header)
        except StorageError as exc:
            self._storage_error = self._storage_error or exc
        store.close()
        # What only the runs needed goes before the results are read back.
        self.plan.planned = {}
        self._progress.clear()
        if self._storage_error is not None:
            return None
        results = store.results()
        self.notify("atp_suite_finished", results=results)
        return results

    def _stop_reason(self) -> str | None:
        if self._stopped_by is not None:
            return signal.Signals(self._stopped_by).name
        if self._storage_error is not None:
            return "storage"
        if self._executor_lost is not None:
            return "executor"
        if self._failed_fast:
            return "fail-fast"
        if self.budget is not None and self.budget.exceeded and self._progress.remaining:
            return "budget"  # only when it left runs out (not when the last run reached it)
        return None

    # --- the runs ------------------------------------------------------------------------

    async def _run_all(self, schedule: Schedule, total: int) -> None:
        runs = self._runs_scope = anyio.CancelScope()
        if self._stopped_by is not None:
            runs.cancel()
        await self.pacing.ready(self)
        takes = self.pacing.takes(self, schedule)
        try:
            async with anyio.create_task_group() as outer:
                if self.pacing.watch_signals:
                    from atp.core.signals import watch_signals

                    outer.start_soon(watch_signals, self.stop, self._again)
                with runs:
                    async with anyio.create_task_group() as workers:
                        for _ in range(min(self._width(), total)):
                            workers.start_soon(self._worker, takes)
                if self.executor is not None:  # while signals are still watched: a second one aborts
                    with anyio.CancelScope(shield=True):
                        await self._close_executor(self.executor)
                outer.cancel_scope.cancel()
        finally:
            self._runs_scope = None

    def _again(self, signal_number: int) -> None:
        logger.warning("stopping every agent at once (a second %s)", signal.Signals(signal_number).name)
        self.abort()

    def _width(self) -> int:
        """How many runs go at once: ``parallel``, within the open-file limit; with an
        executor, as many as its workers take (within ``parallel`` when given)."""
        options = self.options
        if self.executor is None:
            return fit_parallel(options.parallel)
        capacity = self.executor.capacity
        if capacity and options.parallel_from_workers:
            return capacity
        return min(options.parallel, capacity) if capacity else options.parallel

    async def _worker(self, takes: Any) -> None:
        assert self.store is not None
        remote = (
            RemoteRuns(self.executor, self.maker, self.store, self.build_request) if self.executor else None
        )
        while True:
            item = await takes.take()
            if item is None:
                return
            test, run_number = item
            try:
                if remote is not None:
                    result = await remote.make(test, run_number)
                else:
                    result = await self._make(test, run_number)
                self.record(test, result)
            except NotStarted:  # its turn came after the budget was spent: no more runs
                return
            except ExecutorLost as lost:  # no run can be made: stop, keep what finished
                if self._executor_lost is None:
                    self._executor_lost = str(lost)
                    logger.warning(
                        "%s: the runs left are not made (atp test --resume makes them once it is back)", lost
                    )
                if self._runs_scope is not None:
                    self._runs_scope.cancel()
                return
            except StorageError as exc:
                # The run directory cannot take more: stop everything, keep what is written.
                self._storage_error = self._storage_error or exc
                if self._runs_scope is not None:
                    self._runs_scope.cancel()
                return
            # Let the event loop turn between runs even when an agent answered without ever
            # waiting: signals, other workers and timer clean-up get their turn.
            await anyio.lowlevel.checkpoint()

    async def _make(self, test: Test, run_number: int) -> RunResult:
        assert self._adapter is not None and self.store is not None
        async with self.pacing.slot(self):
            return await self.maker.perform(self._adapter, test, run_number, self.store.directory)

    def record(self, test: Test, result: RunResult) -> None:
        """Store a finished run, then let the schedule, the budget, ``--fail-fast`` and the
        plugins know of it."""
        store = self.store
        assert store is not None, "run() creates the store"
        stored = store.append(result)  # (masked, as the run directory holds it)
        if self._schedule is not None:
            self._schedule.finished(test, result)  # at once after the append: the stored order decides
        if self.budget is not None:
            self.budget.spend(result)  # once spent, no new run starts; the runs in flight finish
        if self.options.fail_fast and result.outcome != "passed" and not self._failed_fast:
            self._failed_fast = True
            if self._runs_scope is not None:
                self._runs_scope.cancel()
        # plugins (the console's live lines too) see what is stored
        self.notify("atp_run_finished", result=stored)
        runs = self._progress.finished(stored)
        if runs is not None and self._progress.keep:
            self._test_finished(result.test_id, runs)

    def _test_finished(self, test_id: str, runs: list[RunResult]) -> None:
        planned = self.plan.planned[test_id]
        entry = None
        if self.baseline is not None and self.baseline.suite == self.suite.name:
            entry = self.baseline.tests.get(test_id)
        alpha = self._schedule.alpha if self._schedule is not None else ALPHA
        self.notify(
            "atp_test_finished", result=make_test_result(planned, runs, False, baseline=entry, alpha=alpha)
        )

    # --- plugins that fail ---------------------------------------------------------------

    def _hook_failed(self, plugin: str, hook_name: str, exc: BaseException) -> None:
        """A plugin raised outside any one run's checks: named in a warning (once per plugin and
        hook) and recorded in the results; the run goes on."""
        if (plugin, hook_name) in self._failed_hooks:
            return
        self._failed_hooks.add((plugin, hook_name))
        masker = self.masker
        message = mask(f"{type(exc).__name__}: {exc}", masker)
        logger.warning(
            "%s raised in its %s hook: %s (the run goes on)",
            self.plugins.describe(plugin),
            hook_name,
            message,
        )
        self.plugin_failures.append(
            PluginFailure(
                plugin=plugin,
                where=hook_name,
                message=shorten(message, MAX_ERROR_CHARS),
                traceback=shorten(format_exception(exc), MAX_TRACEBACK_CHARS, masker),
            )
        )

    async def _close_adapter(self, adapter: Adapter) -> None:
        """Release the adapter; a failure there is warned about and recorded, the results stand."""
        try:
            await adapter.aclose()
        except Exception as exc:
            owner = self.plugins.owner_name("adapter", self.agent.type) or self.agent.type
            self._hook_failed(owner, "aclose", single_exception(exc))

    async def _close_executor(self, executor: Executor) -> None:
        """Let the executor stop what is still running on its workers and disconnect (once); a
        failure there is warned about and recorded, the results stand."""
        if self._executor_closed:
            return
        self._executor_closed = True
        try:
            await executor.aclose()
        except Exception as exc:
            owner = self.plugins.owner_name("executor", executor.name) or executor.name
            self._hook_failed(owner, "executor aclose", single_exception(exc))


def fit_parallel(wanted: int) -> int:
    """``wanted`` runs at once, within what the open-file limit allows: the soft limit is raised
    to the hard one, and if that is still too low, fewer runs go at once (with a warning)."""
    needed = FILES_BASE + FILES_PER_RUN * wanted
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    fitting = max(1, (soft - FILES_BASE) // FILES_PER_RUN)
    logger.warning(
        "--parallel %d needs about %d open files, but this process may open %d (ulimit -n); running %d at once instead",
        wanted,
        needed,
        soft,
        fitting,
    )
    return fitting


def make_adapter(plugins: Plugins, agent: ResolvedAgent, masker: Masker | None = None) -> Adapter:
    """The agent's adapter: an AtpError is its own message; any other exception is the plugin's
    failure (:class:`~atp.core.errors.PluginFailed` naming it, its message masked with
    ``masker``)."""
    try:
        adapter: Adapter = agent.create_adapter()
    except AtpError:
        raise
    except Exception as exc:
        raise _adapter_failed(plugins, agent, "could not be created", exc, masker) from exc
    return adapter


async def start_adapter(
    plugins: Plugins,
    agent: ResolvedAgent,
    adapter: Adapter,
    masker: Masker | None = None,
    processes: ProcessLedger | None = None,
) -> None:
    """Open the adapter with the run's ``masker`` and process ledger (``processes``): an
    AtpError is its own message (the agent cannot be reached); any other exception is the
    plugin's failure."""
    try:
        await adapter.open(masker=masker, processes=processes)
    except AtpError:
        raise
    except Exception as exc:
        inner = single_exception(exc)
        raise _adapter_failed(
            plugins, agent, "failed to start", inner if isinstance(inner, Exception) else exc, masker
        ) from exc


def _adapter_failed(
    plugins: Plugins, agent: ResolvedAgent, what: str, exc: Exception, masker: Masker | None
) -> PluginFailed:
    owner = plugins.owner("adapter", agent.type)
    failure = PluginFailed(
        f"adapter {agent.type!r} of {owner} {what} for agent {agent.name!r}: "
        f"{type(exc).__name__}: {shorten(str(exc), MAX_ERROR_CHARS, masker)}"
    )
    failure.__cause__ = exc
    return failure
