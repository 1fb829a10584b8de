"""The runner: every selected test, N times, through the agent's adapter, into the run directory.

For each run it builds the ATP request (a fresh task_id; the test's constraints; metadata with
test_id, run_number and total_runs), executes it through the adapter under the platform's time
limit, checks the response, runs the evaluators, scores the run and appends the result to the
run directory before anything else sees it. ``parallel`` bounds how many runs are in flight.

A test that asks for services (:mod:`atp.core.service`, the mock tool server) has each of them
entered around each of its runs: a service is started once, lazily, before the first run that
needs it, and the request the agent gets is the one the services yield; the services are
closed at the end, where the adapter is. A test without services costs nothing of this.

An agent that times out, crashes, lies or floods fails its own run with a reason; the other runs
go on, as they do when a service cannot start (the runs that need it are errors naming it).
Ctrl-C (or SIGTERM) stops the runs in flight, stops their agents, leaves every finished result
in the run directory and raises :class:`Interrupted`.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import msgspec

from atp.core import files
from atp.core.adapter import Adapter
from atp.core.adaptive import Adaptive, decide, replay
from atp.core.baseline import Baseline, sequential_alpha
from atp.core.config import ResolvedAgent
from atp.core.errors import AgentError, AtpError, ExecutorLost, PluginFailed, StorageError
from atp.core.evaluator import (
    CannotEvaluate,
    EvalContext,
    Evaluator,
    EvaluatorResultError,
    StepTimer,
    checked_result,
    is_async,
)
from atp.core.executor import Executor, Job, Shipped
from atp.core.ledger import ProcessLedger, activate, stop_abandoned
from atp.core.limits import BudgetMeter, RateLimit, RateLimiter
from atp.core.plugins import HookCall, Plugins, format_exception
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, Context, Event, sane_metrics
from atp.core.results import (
    BaselineRef,
    Budget,
    Check,
    Outcome,
    PlannedTest,
    PluginFailure,
    Retry,
    RunHeader,
    RunResult,
    RunStore,
    Shard,
    SuiteResults,
    events_path,
    log_path,
    make_test_result,
    new_run_id,
    utcnow,
    workspace_path,
)
from atp.core.resume import check_resumable, done_runs
from atp.core.retry import DEFAULT_BACKOFF_SECONDS, MAX_RETRIES, Fault, backoff, infrastructure_fault
from atp.core.scoring import score_run
from atp.core.secrets import Masker
from atp.core.service import Recorder, Service
from atp.core.stats import ALPHA, Running, Sample
from atp.core.suite import Assertion, Suite, Test, suite_fingerprint, test_fingerprint
from atp.core.text import as_text, describe, masking, printable, shorten
from atp.core.trace import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_EVENTS, DEFAULT_MAX_LOG_BYTES, RunTrace

logger = logging.getLogger("atp.runner")

FILES_BASE = 64
"""Open files ATP itself may need besides its runs (plugins, the run directory, reporters)."""
FILES_PER_RUN = 10
"""Open files one run in flight may need: an agent's three pipes (both ends while it starts),
its pidfd, the events and log files."""
MAX_ERROR_CHARS = 4000
"""An agent's error text is kept up to this many characters."""
MAX_TRACEBACK_CHARS = 8000
"""A plugin's traceback is kept up to this many characters."""
BLOCKING_STEP_SECONDS = 0.5
"""An ``async`` evaluator holding the event loop this long in one step is warned about: every
other run in flight waited for it."""
SERVICE_LEAVE_SECONDS = 30.0
"""How long a service may take to leave a run (its ``run`` context's exit) before it is
abandoned with a warning."""
REMOTE_SPARE_SECONDS = 60.0
"""How much longer than its time limits a run on a worker may take before the worker counts
as lost."""
LIFECYCLE_HOOKS = (
    "atp_suite_started",
    "atp_test_started",
    "atp_run_started",
    "atp_event",
    "atp_run_finished",
    "atp_test_finished",
    "atp_suite_finished",
)


_shipped_decoder = msgspec.json.Decoder(RunResult)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT (Ctrl-C) or SIGTERM after its finished results were
    stored; ``signal_number`` says which."""

    def __init__(self, signal_number: int, directory: Path) -> None:
        self.signal_number = signal_number
        self.directory = directory
        name = signal.Signals(signal_number).name
        super().__init__(f"stopped by {name}; finished runs are kept in {directory}")


class Runner:
    """Runs the selected tests of a suite against one agent."""

    def __init__(
        self,
        plugins: Plugins,
        suite: Suite,
        tests: list[Test],
        agent: ResolvedAgent,
        *,
        run_root: Path,
        masker: Masker | None = None,
        parallel: int = 1,
        runs: int | Literal["auto"] | None = None,
        deselected: int = 0,
        fail_fast: bool = False,
        evaluator_settings: Callable[[str], dict[str, Any]] | None = None,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
        baseline: Baseline | None = None,
        baseline_ref: BaselineRef | None = None,
        secrets: Mapping[str, str] | None = None,
        retries: int = 0,
        retry_backoff: float = DEFAULT_BACKOFF_SECONDS,
        budget: Budget | None = None,
        rate_limit: RateLimit | None = None,
        quarantine: Collection[str] = (),
        shard: Shard | None = None,
        shares: Mapping[str, list[int] | None] | None = None,
        resume: Path | None = None,
        force: bool = False,
        executor: Executor | None = None,
        job: Job | None = None,
    ) -> None:
        if parallel < 1:
            raise AtpError("--parallel must be at least 1")
        self.plugins = plugins
        self.suite = suite
        self.tests = tests
        self.agent = agent
        self.run_root = run_root
        self.masker = masker if masker else None
        self.parallel = parallel
        self.runs = runs
        self.deselected = deselected
        self.fail_fast = fail_fast
        self.evaluator_settings = evaluator_settings or (lambda name: {})
        self.secrets: Mapping[str, str] = secrets or {}
        """The config's ``secrets:``, given to evaluators that need a key."""
        self.max_events = max_events
        self.max_event_bytes = max_event_bytes
        self.max_log_bytes = max_log_bytes
        self.baseline = baseline
        """The baseline the results are compared with; it also lets adaptive tests stop once
        the comparison is decided."""
        self.baseline_ref = baseline_ref
        if not 0 <= retries <= MAX_RETRIES:
            raise AtpError(f"retries must be from 0 to {MAX_RETRIES}, not {retries}")
        self.retries = retries
        """How many times a run that met a fault of the infrastructure is tried again."""
        self.retry_backoff = retry_backoff
        self._budget = BudgetMeter(budget) if budget is not None else None
        self._rate = RateLimiter(rate_limit) if rate_limit is not None else None
        self.quarantine = frozenset(quarantine)
        """The ids of the tests whose failures do not fail the run."""
        self.shard = shard
        self.shares = shares
        """With ``shard``: the run numbers of each test in this shard (``None``: all of its
        runs); a test not named is another shard's."""
        self.resume = resume
        """A run directory to go on with: only the runs it does not hold are made."""
        self.force = force
        """With ``resume``: go on even when the suite changed since."""
        self._resuming = False
        self._own_plan = False
        self._executor_lost: str | None = None
        self._executor_closed = False
        """Why the executor could make no more runs (its cluster was lost), once it could not."""
        """Whether the tests' runs, plans and skips are those of :attr:`_planned` (a resumed
        run's header, or the plan a cluster worker was sent) rather than worked out here."""
        self._earlier_failures: list[PluginFailure] = []
        """A resumed run's plugin failures from before (kept with the new ones)."""
        self._done: dict[str, list[RunResult]] = {}
        """With ``resume``: the runs the directory held, by test."""
        self.run_id = ""
        self.executor = executor
        """Where the runs are made when not here (:mod:`atp.core.executor`); ``None``: here."""
        self.parallel_from_workers = False
        """With ``executor``: as many runs at once as its workers take (``--parallel`` not given)."""
        self.job = job
        """With ``executor``: what its workers load (the config file, the evaluator overrides);
        the run id and the tests are filled in when the run starts."""
        self.store: RunStore | None = None
        self._evaluators: dict[str, Evaluator] = {}
        self._evaluator_limits: dict[str, float] = {}
        self._remaining: dict[str, int] = {}
        self._finished_runs: dict[str, list[RunResult]] = {}
        self._planned: dict[str, PlannedTest] = {}
        self._stopped_by: int | None = None
        self._failed_fast = False
        self._storage_error: StorageError | None = None
        self._runs_scope: anyio.CancelScope | None = None
        self._failed_hooks: set[tuple[str, str]] = set()
        self.plugin_failures: list[PluginFailure] = []
        """Plugins that raised in a lifecycle hook (each plugin and hook once)."""
        self._warned_blocking: set[str] = set()
        self._callers: dict[str, list[HookCall]] = {name: [] for name in LIFECYCLE_HOOKS}
        self._services: dict[str, _Started] = {}
        """The services made for this suite, by key (made and started on first use)."""
        self._services_lock: anyio.Lock | None = None
        self._schedule: _Schedule | None = None

    def set_budget(self, budget: Budget | None) -> None:
        """What this ``atp test`` may spend (checked after each finished run)."""
        self._budget = BudgetMeter(budget) if budget is not None else None

    def set_rate_limit(self, limit: RateLimit | None) -> None:
        """How fast runs may start against the agent (every worker shares it)."""
        self._rate = RateLimiter(limit) if limit is not None else None

    def _notify(self, hook_name: str, **kwargs: Any) -> None:
        """Call each plugin's implementation of a lifecycle hook; one that raises is named in
        a warning (once) and recorded, and the others are still called."""
        for call in self._callers[hook_name]:
            try:
                call.function(*[kwargs[name] for name in call.argnames])
            except Exception as exc:
                self._hook_failed(call.plugin, hook_name, exc)

    def _hook_failed(self, plugin: str, hook_name: str, exc: BaseException) -> None:
        if (plugin, hook_name) in self._failed_hooks:
            return
        self._failed_hooks.add((plugin, hook_name))
        message = f"{type(exc).__name__}: {exc}"
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
                traceback=shorten(format_exception(exc), MAX_TRACEBACK_CHARS),
            )
        )

    def plan_of(self, test: Test) -> Adaptive | None:
        """The test's adaptive plan, when it runs by one (its own ``auto``, or ``--runs=auto``)."""
        if self._own_plan:
            return self._planned[test.id].adaptive
        if self.runs == "auto" or (self.runs is None and test.auto):
            return test.adaptive
        return None

    def skip_of(self, test: Test) -> str | None:
        """Why the test is not run: the suite's ``skip`` (a resumed run's, as it planned it)."""
        if self._own_plan:
            return self._planned[test.id].skip
        return test.skip

    def runs_of(self, test: Test) -> int:
        """The runs planned for a test (under an adaptive plan, the most it may take)."""
        if self._own_plan:
            return self._planned[test.id].runs
        plan = self.plan_of(test)
        if plan is not None:
            return plan.max_runs
        return self.runs if isinstance(self.runs, int) else test.runs

    async def run(self) -> SuiteResults:
        """Run everything; returns the results as the run directory holds them."""
        self._callers = {name: self.plugins.callers(name) for name in LIFECYCLE_HOOKS}
        self.begin()
        for message in stop_abandoned(self.run_root if self.resume is None else self.resume.parent):
            logger.warning(message)
        if self.resume is not None:
            store, header = self._reopen(self.resume)
        else:
            header = self._new_header()
            store = RunStore.create(self.run_root, header, self.masker, self.baseline)
        planned = header.tests
        self._planned = {p.id: p for p in planned}
        self.store = store
        self.run_id = header.run_id
        schedule = self._schedule = _Schedule(self, self.tests, self._done)
        total = 0
        for test in self.tests:
            if self.skip_of(test) is None and not schedule.decided(test.id):
                left = (
                    self._planned[test.id].runs
                    if self.plan_of(test) is not None
                    else len(self._planned[test.id].share())
                )
                left -= len(self._done.get(test.id, ()))
                if left > 0:
                    self._remaining[test.id] = left
                    total += left
                    if self._done.get(test.id) and self._callers["atp_test_finished"]:
                        self._finished_runs[test.id] = list(self._done[test.id])
        self._done = {}
        adapter: Adapter | None = None
        interrupted = True
        started = False
        processes = ProcessLedger.create(store.directory)
        try:
            with activate(processes), masking(self.masker):
                try:
                    if self.executor is not None:
                        await self.executor.start(self._job(header))
                    else:
                        adapter = self._adapter_step("could not be created", self.agent.create_adapter)
                        await self._adapter_call("failed to start", adapter.start)
                    if self.resume is not None:
                        self._resumed(header)
                    started = True
                    self._notify("atp_suite_started", header=header, directory=store.directory)
                    await self._run_all(adapter, schedule, total)
                    interrupted = (
                        self._stopped_by is not None
                        or self._storage_error is not None
                        or self._executor_lost is not None
                    )
                finally:
                    if adapter is not None:
                        with anyio.CancelScope(shield=True):
                            await self._close(adapter)
                    if self.executor is not None:
                        with anyio.CancelScope(shield=True):
                            await self._close_executor(self.executor)
                    await self.end()
        finally:
            if not started:  # the agent could not start: nothing ran, no new run directory is left
                store.close()
                if self.resume is None:
                    _discard(store.directory)
            else:
                header.finished_at = utcnow()
                header.interrupted = interrupted
                header.stopped_by = self._stop_reason()
                header.plugin_failures = [*self._earlier_failures, *self.plugin_failures]
                try:
                    store.write_header(header)
                except StorageError as exc:
                    self._storage_error = self._storage_error or exc
                store.close()
                # What only the runs needed goes before the results are read back (the header
                # and its planned tests are read back with them).
                del header, planned
                self._planned, self._remaining, self._finished_runs = {}, {}, {}
                if self._storage_error is None:
                    results = store.results()
                    self._notify("atp_suite_finished", results=results)
        if self._storage_error is not None:
            raise StorageError(
                f"{self._storage_error}; the suite was stopped. The results written before are "
                f"kept in {store.directory} (atp report {store.directory})"
            )
        if self._stopped_by is not None:
            raise Interrupted(self._stopped_by, store.directory)
        return results

    def _job(self, header: RunHeader) -> Job:
        """What the executor's workers load to make this run's runs."""
        import os

        base = self.job or Job(suite_path=str(self.suite.path or ""), agent=self.agent.name)
        return msgspec.structs.replace(
            base,
            key=f"{header.run_id}-{os.urandom(4).hex()}",
            run_id=header.run_id,
            runs=self.runs,
            tests={t.id: test_fingerprint(t) for t in self.tests},
            plan=list(header.tests),
        )

    def follow_plan(self, planned: list[PlannedTest]) -> None:
        """Make the tests' runs, adaptive plans and skips those of ``planned`` (what ATP planned,
        for a cluster worker's runs)."""
        self._planned = {p.id: p for p in planned}
        self._own_plan = True

    def begin(self) -> None:
        """Get ready to make runs on the current event loop (:meth:`run` does; a cluster
        worker's session calls it before :meth:`perform_once`)."""
        self._services_lock = anyio.Lock()

    async def end(self) -> None:
        """Close the services and evaluators the runs made, shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            if self._services:
                await self._close_services()
            if self._evaluators:
                await self._close_evaluators()

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
            self._hook_failed(owner, "executor aclose", _single(exc))

    def _stop_reason(self) -> str | None:
        if self._stopped_by is not None:
            return signal.Signals(self._stopped_by).name
        if self._storage_error is not None:
            return "storage"
        if self._executor_lost is not None:
            return "executor"
        if self._failed_fast:
            return "fail-fast"
        if self._budget is not None and self._budget.exceeded and self._remaining:
            return "budget"  # only when it left runs out (not when the last run reached it)
        return None

    def _planned_test(self, test: Test) -> PlannedTest:
        share = self.shares.get(test.id) if self.shares is not None else None
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
            quarantined=test.id in self.quarantine,
            run_numbers=share,
        )

    def _new_header(self) -> RunHeader:
        """The header of a new run directory: the selected tests (this shard's, with ``shard``)
        as planned now."""
        fingerprint = suite_fingerprint(self.tests)  # of the whole selection, a shard's too
        if self.shares is not None:
            self.tests = [t for t in self.tests if t.id in self.shares]
        return RunHeader(
            run_id=new_run_id(),
            suite=self.suite.name,
            suite_file=str(self.suite.path) if self.suite.path else None,
            agent=self.agent.name,
            agent_type=self.agent.type,
            started_at=utcnow(),
            deselected=self.deselected,
            tests=[self._planned_test(t) for t in self.tests],
            suite_fingerprint=fingerprint,
            baseline=self.baseline_ref if self.baseline is not None else None,
            shard=self.shard,
            budget=self._budget.budget if self._budget is not None else None,
        )

    def _reopen(self, directory: Path) -> tuple[RunStore, RunHeader]:
        """Go on with the run in ``directory``: its own plan, the runs it holds counted as done
        (see :mod:`atp.core.resume`)."""
        store = RunStore.open(directory, self.masker)
        store.lock()  # before reading: another atp test may be finishing it
        try:
            header = store.read_header()
            tests = {t.id: t for t in self.suite.tests}
            check_resumable(header, self.suite.name, self.agent.name, tests, force=self.force)
            store.repair()
        except BaseException:
            store.close()
            raise
        for problem in store.problems:
            logger.warning(problem)
        self.tests = [tests[p.id] for p in header.tests if p.id in tests]
        self._planned = {p.id: p for p in header.tests}
        self._earlier_failures = list(header.plugin_failures)
        if self.force:  # the tests as they are now are what the runs left make
            for planned in header.tests:
                if planned.id in tests:
                    planned.fingerprint = test_fingerprint(tests[planned.id])
            selection = header.shard.order if header.shard is not None else [p.id for p in header.tests]
            header.suite_fingerprint = suite_fingerprint(tests[i] for i in selection if i in tests)
        self._done = done_runs(store.read_results(), header)
        self._resuming = self._own_plan = True
        for planned in header.tests:  # a quarantine is today's policy, not part of the plan
            planned.quarantined = planned.id in self.quarantine
        if self.baseline is None:
            self.baseline = store.baseline()
        return store, header

    def _resumed(self, header: RunHeader) -> None:
        """The header of a resumed run once its agent started (not before: a resume that
        cannot start leaves the directory as it was)."""
        assert self.store is not None
        header.resumed_at.append(utcnow())
        header.finished_at = None
        header.interrupted = False
        header.stopped_by = None
        header.budget = self._budget.budget if self._budget is not None else None
        self.store.write_header(header)

    def _adapter_failed(self, what: str, exc: Exception) -> PluginFailed:
        owner = self.plugins.owner("adapter", self.agent.type)
        failure = PluginFailed(
            f"adapter {self.agent.type!r} of {owner} {what} for agent {self.agent.name!r}: "
            f"{type(exc).__name__}: {shorten(str(exc), MAX_ERROR_CHARS)}"
        )
        failure.__cause__ = exc
        return failure

    def _adapter_step(self, what: str, step: Callable[[], Adapter]) -> Adapter:
        try:
            return step()
        except AtpError:
            raise
        except Exception as exc:
            raise self._adapter_failed(what, exc) from exc

    async def _adapter_call(self, what: str, step: Callable[[], Any]) -> None:
        """An adapter's ``start``: an AtpError is its own message (the agent cannot be
        reached); any other exception is the plugin's failure."""
        try:
            await step()
        except AtpError:
            raise
        except Exception as exc:
            inner = _single(exc)
            raise self._adapter_failed(what, inner if isinstance(inner, Exception) else exc) from exc

    async def _close(self, adapter: Adapter) -> None:
        """Release the adapter; a failure there is warned about and recorded, the results stand."""
        try:
            await adapter.aclose()
        except Exception as exc:
            owner = self.plugins.owner_name("adapter", self.agent.type) or self.agent.type
            self._hook_failed(owner, "aclose", _single(exc))

    # --- services ------------------------------------------------------------------------------

    async def _service(self, key: str) -> Service:
        """The service of ``key``, made and started on first use (one start, whatever the runs
        in flight); raises :class:`_ServiceFailed` when it cannot be made or did not start."""
        started = self._services.get(key)
        if started is None or not started.ready:
            lock = self._services_lock
            assert lock is not None, "run() makes the lock"
            async with lock:
                started = self._services.get(key)
                if started is None:
                    started = self._services[key] = _Started()
                    try:
                        started.service = self.plugins.service(key)()
                    except Exception as exc:
                        started.failed(self._service_failure(key, "could not be created", exc))
                if started.failure is None and not started.ready:
                    assert started.service is not None
                    try:
                        await started.service.start()
                    except Exception as exc:
                        started.failed(self._service_failure(key, "failed to start", _single(exc)))
                    else:
                        started.ready = True
        if started.failure is not None:
            raise started.failure
        assert started.service is not None
        return started.service

    def _service_failure(self, key: str, what: str, exc: BaseException) -> _ServiceFailed:
        message = f"service {key!r} of {self.plugins.owner('service', key)} {what}: "
        if isinstance(exc, AtpError):
            return _ServiceFailed(message + str(exc))
        return _ServiceFailed(
            f"{message}{type(exc).__name__}: {shorten(str(exc), MAX_ERROR_CHARS)}",
            shorten(format_exception(exc), MAX_TRACEBACK_CHARS),
        )

    async def _enter_services(
        self, test: Test, request: ATPRequest, trace: RunTrace, entered: _Entered
    ) -> ATPRequest:
        """Enter the test's services for one run, in order; the request each yields goes to the
        next, the last one's to the agent."""
        for use in test.services:
            entered.pending = use.key
            service = await self._service(use.key)
            try:
                context = service.run(use.config, request, Recorder(trace, use.key))
                yielded = await context.__aenter__()
            except Exception as exc:
                raise self._service_failure(
                    use.key, "could not get ready for the run", _single(exc)
                ) from None
            entered.contexts.append((use.key, context))
            if not isinstance(yielded, ATPRequest) or yielded.task_id != request.task_id:
                what = (
                    f"changed the request's task_id to {yielded.task_id!r}"
                    if isinstance(yielded, ATPRequest)
                    else f"yielded {describe(yielded)}, not an ATPRequest"
                )
                raise _ServiceFailed(
                    f"service {use.key!r} of {self.plugins.owner('service', use.key)} {what}"
                )
            request = yielded
        entered.pending = None
        return request

    async def _leave_services(self, entered: _Entered, trace: RunTrace) -> None:
        """Leave the services entered for a run, last first, shielded from cancellation; one
        that raises is a warning on the run and a plugin failure, and the others are left."""
        for key, context in reversed(entered.contexts):
            with anyio.move_on_after(SERVICE_LEAVE_SECONDS, shield=True) as scope:
                try:
                    await context.__aexit__(None, None, None)
                except Exception as exc:
                    inner = _single(exc)
                    trace.warn(f"service {key!r} failed when the run ended: {type(inner).__name__}: {inner}")
                    self._hook_failed(
                        self.plugins.owner_name("service", key) or key, f"service {key!r}", inner
                    )
            if scope.cancelled_caught:
                trace.warn(
                    f"service {key!r} did not finish leaving the run within {SERVICE_LEAVE_SECONDS:g} s"
                )

    async def _close_services(self) -> None:
        """Close every service made (even one whose start failed); a failure there is warned
        about and recorded, the results stand."""
        for key, started in self._services.items():
            if started.service is None:
                continue
            try:
                await started.service.aclose()
            except Exception as exc:
                self._hook_failed(
                    self.plugins.owner_name("service", key) or key, f"service {key!r} aclose", _single(exc)
                )

    async def _close_evaluators(self) -> None:
        """Let every evaluator made release what it holds (a judge's connections), each within
        :data:`SERVICE_LEAVE_SECONDS`; a failure is warned about and recorded, the results stand."""
        for name, evaluator in self._evaluators.items():
            try:
                with anyio.fail_after(SERVICE_LEAVE_SECONDS):
                    await evaluator.aclose()
            except Exception as exc:
                self._hook_failed(
                    self.plugins.owner_name("evaluator", name) or name,
                    f"evaluator {name!r} aclose",
                    _single(exc),
                )

    async def _run_all(self, adapter: Adapter | None, items: _Schedule, total: int) -> None:
        runs = self._runs_scope = anyio.CancelScope()
        if self.executor is not None:  # as many as the workers take at once, within --parallel
            capacity = self.executor.capacity
            if capacity and self.parallel_from_workers:
                width = capacity
            else:
                width = min(self.parallel, capacity) if capacity else self.parallel
        else:
            width = self._fit_parallel()
        async with anyio.create_task_group() as outer:
            if threading.current_thread() is threading.main_thread():
                outer.start_soon(self._watch_signals, runs, adapter)
            with runs:
                async with anyio.create_task_group() as workers:
                    for _ in range(min(width, total)):
                        workers.start_soon(self._worker, adapter, items)
            if self.executor is not None:  # while signals are still watched: a second one aborts
                with anyio.CancelScope(shield=True):
                    await self._close_executor(self.executor)
            outer.cancel_scope.cancel()

    def _fit_parallel(self) -> int:
        """``parallel``, within what the open-file limit allows: the soft limit is raised to the
        hard one, and if that is still too low, fewer runs go at once (with a warning)."""
        wanted = self.parallel
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
            "--parallel %d needs about %d open files, but this process may open %d (ulimit -n); "
            "running %d at once instead",
            wanted,
            needed,
            soft,
            fitting,
        )
        return fitting

    async def _watch_signals(self, runs: anyio.CancelScope, adapter: Adapter | None) -> None:
        """Ctrl-C and SIGTERM stop the runs in flight (their agents are stopped by the
        adapter) the same way on every Python version; the finished ones are already stored.
        A second signal while agents are being stopped kills them at once."""
        try:
            receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
        except (NotImplementedError, ValueError, AttributeError):  # pragma: no cover - not POSIX
            return
        with receiver as signals:
            async for signum in signals:
                if self._stopped_by is None:
                    self._stopped_by = int(signum)
                    runs.cancel()
                    continue
                logger.warning("stopping every agent at once (a second %s)", signal.Signals(signum).name)
                try:
                    if adapter is not None:
                        adapter.abort()
                    if self.executor is not None:
                        self.executor.abort()
                except Exception as exc:
                    logger.warning("adapter %r could not abort its agents: %s", self.agent.type, exc)

    async def _worker(self, adapter: Adapter | None, items: _Schedule) -> None:
        while True:
            item = await items.take()
            if item is None:
                return
            test, run_number = item
            try:
                if adapter is None:
                    await self.run_remote(test, run_number)
                else:
                    await self.run_one(adapter, test, run_number)
            except _NotStarted:  # its turn came after the budget was spent: no more runs
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

    # --- one run -------------------------------------------------------------------------

    def build_request(
        self, test: Test, run_number: int, workspace: Path | None = None, task_id: str | None = None
    ) -> ATPRequest:
        return ATPRequest(
            version=PROTOCOL_VERSION,
            task_id=task_id or str(uuid.uuid4()),
            task=test.task,
            constraints=test.constraints,
            context=Context(workspace_path=str(workspace)) if workspace is not None else None,
            metadata={
                "test_id": test.id,
                "run_number": run_number,
                "total_runs": self.runs_of(test),
                **({"adaptive": True} if self.plan_of(test) is not None else {}),
                "suite": self.suite.name,
                "run_id": self.run_id,
            },
        )

    async def run_one(self, adapter: Adapter, test: Test, run_number: int) -> RunResult:
        """Make one run (tried again after faults of the infrastructure, as ``retries`` allows)
        and store its result."""
        store = self.store
        assert store is not None, "run() creates the store"
        result = await self.perform(adapter, test, run_number, store.directory)
        self.record(test, result)
        return result

    async def run_remote(self, test: Test, run_number: int) -> RunResult:
        """Make one run through the executor and store what it sends back: its events and log
        written here, the result appended; the retries of faults of the infrastructure (a worker
        lost, an agent the worker could not reach) decided and recorded here."""
        executor, store = self.executor, self.store
        assert executor is not None and store is not None, "run() starts the executor and creates the store"
        callers = self._callers
        if self._rate is not None:  # the first attempt's turn (a run whose turn comes too late is not made)
            await self._rate.acquire()
            if self._budget_spent():
                raise _NotStarted
        request = self.build_request(test, run_number)
        if run_number == 1 and callers["atp_test_started"]:
            self._notify("atp_test_started", test=test)
        if callers["atp_run_started"]:
            self._notify("atp_run_started", test=test, run_number=run_number, request=request)
        retries: list[Retry] = []
        limit = self._remote_limit(test)
        attempt = 1
        while True:
            if self._rate is not None and attempt > 1:
                await self._rate.acquire()
            task_id = request.task_id if attempt == 1 else str(uuid.uuid4())
            started_at, started = utcnow(), time.perf_counter()
            shipped: Shipped | None = None
            fault: Fault | None = None
            failure: str | None = None
            with anyio.move_on_after(limit) as waited:
                try:
                    shipped = await executor.execute(test.id, run_number, task_id)
                except ExecutorLost as lost:  # no run can be made: stop, keep what finished
                    if self._executor_lost is None:
                        self._executor_lost = str(lost)
                        logger.warning(
                            "%s: the runs left are not made (atp test --resume makes them once it is back)",
                            lost,
                        )
                    if self._runs_scope is not None:
                        self._runs_scope.cancel()
                    raise _NotStarted from None
                except Exception as raised:
                    exc = _single(raised)
                    fault = infrastructure_fault(exc)
                    if fault is None:
                        failure = (
                            f"executor {executor.name!r} could not make the run: {type(exc).__name__}: {exc}"
                        )
            if waited.cancelled_caught:
                fault = Fault(f"the executor did not send the run back within {limit:g} s")
            if shipped is not None and shipped.fault is not None:
                fault = Fault(shipped.fault, shipped.retry_after)
            where = shipped.where if shipped is not None and shipped.where else None
            wait = self._next_attempt(attempt, fault, retries, where)
            if wait is None:
                break
            await anyio.sleep(wait)
            attempt += 1
        result, readable = self._shipped_result(test, run_number, shipped)
        if result is not None and fault is not None and retries and result.error:
            result.error = shorten(_after_retries(result.error, retries), MAX_ERROR_CHARS)
        if result is None:
            error = failure or (fault.reason if fault is not None else "the executor sent nothing back")
            if retries:
                error = _after_retries(error, retries)
            if self.masker is not None:
                error = self.masker.text(error)
            result = RunResult(
                test_id=test.id,
                run_number=run_number,
                task_id=task_id,
                outcome="error",
                status="failed",
                score=0.0,
                duration_seconds=round(time.perf_counter() - started, 6),
                started_at=started_at,
                error=shorten(error, MAX_ERROR_CHARS),
            )
        elif readable:
            self._store_shipped(test, result, shipped)
        result.retries = retries + result.retries
        self.record(test, result)
        return result

    def _remote_limit(self, test: Test) -> float:
        """How long a run may take on a worker before ATP counts the worker as lost: the
        test's time limit, its evaluators' and a minute to spare."""
        timeout = float(test.timeout_seconds)
        if self.agent.timeout is not None:
            timeout = min(timeout, float(self.agent.timeout))
        return timeout + sum(self._evaluator_timeout(a.type) for a in test.assertions) + REMOTE_SPARE_SECONDS

    def _shipped_result(
        self, test: Test, run_number: int, shipped: Shipped | None
    ) -> tuple[RunResult | None, bool]:
        """The result a worker sent, and whether it is one of this run (else an error result
        saying what came back instead); ``None`` when nothing came back."""
        if shipped is None:
            return None, False
        try:
            result = _shipped_decoder.decode(shipped.result)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            return RunResult(
                test_id=test.id, run_number=run_number, task_id="", outcome="error", status="failed", score=0.0,
                duration_seconds=0.0, started_at=utcnow(),
                error=f"the worker {printable(shipped.where)} sent back a result ATP cannot read: {exc}",
            ), False  # fmt: skip
        if result.test_id != test.id or result.run_number != run_number:
            return RunResult(
                test_id=test.id, run_number=run_number, task_id=result.task_id, outcome="error", status="failed",
                score=0.0, duration_seconds=0.0, started_at=utcnow(),
                error=f"the worker {printable(shipped.where)} sent back the result of another run "
                f"({shorten(printable(result.test_id))} run {result.run_number})",
            ), False  # fmt: skip
        return result, True

    def _store_shipped(self, test: Test, result: RunResult, shipped: Shipped | None) -> None:
        """Write a shipped run's events and log where this run directory keeps them (named here:
        a worker names no path), and replay the events to the plugins that follow them."""
        store = self.store
        assert store is not None and shipped is not None
        result.events_file = result.log_file = None
        for data, name in ((shipped.events, events_path), (shipped.log, log_path)):
            if not data:
                continue
            relative = name(result.test_id, result.run_number)
            path = store.directory / relative
            try:
                path.parent.mkdir(exist_ok=True)
                files.write_new(path, data)
            except OSError as exc:
                raise StorageError(f"cannot write {path}: {files.reason(exc)}") from None
            if name is events_path:
                result.events_file = relative
            else:
                result.log_file = relative
        if self._callers["atp_event"] and result.events_file is not None:
            for event in store.events(result):
                self._notify("atp_event", test=test, run_number=result.run_number, event=event)

    async def perform(self, adapter: Adapter, test: Test, run_number: int, directory: Path) -> RunResult:
        """One run's result, its events and log written below ``directory``: the request
        executed through the adapter (again after each fault of the infrastructure while
        retries are left), the response checked, evaluated and scored. Nothing is stored. A run
        whose turn (under the rate limit) comes once the budget is spent is not made
        (:class:`_NotStarted`)."""
        if self._rate is not None:
            await self._rate.acquire()
            if self._budget_spent():
                raise _NotStarted
        if run_number == 1 and self._callers["atp_test_started"]:
            self._notify("atp_test_started", test=test)
        retries: list[Retry] = []
        attempt = 1
        while True:
            tried = await self._attempt(adapter, test, run_number, directory, attempt)
            wait = self._next_attempt(attempt, tried.fault, retries)
            if wait is None:
                break
            await anyio.sleep(wait)
            attempt += 1
        if tried.fault is not None and retries:
            tried.error = _after_retries(tried.error or tried.fault.reason, retries)
        return await self._finish(adapter, test, run_number, tried, retries)

    def _next_attempt(
        self, attempt: int, fault: Fault | None, retries: list[Retry], where: str | None = None
    ) -> float | None:
        """The wait before another attempt at a run whose attempt number ``attempt`` met
        ``fault`` (recorded in ``retries``); ``None`` when there is none: no fault, no retries
        left, or a spent budget."""
        if fault is None or attempt > self.retries or self._budget_spent():
            return None
        wait = backoff(attempt, self.retry_backoff, fault.retry_after)
        reason = self.masker.text(fault.reason) if self.masker is not None else fault.reason
        retries.append(
            Retry(
                attempt=attempt,
                reason=shorten(reason, MAX_ERROR_CHARS),
                waited_seconds=round(wait, 3),
                where=where,
            )
        )
        return wait

    def _budget_spent(self) -> bool:
        return self._budget is not None and self._budget.exceeded

    async def perform_once(
        self, adapter: Adapter, test: Test, run_number: int, directory: Path, task_id: str | None = None
    ) -> tuple[RunResult, Fault | None]:
        """One attempt at a run and its result, with the fault of the infrastructure it met, if
        any, for the caller to decide on another attempt (a cluster worker's runs: ATP decides)."""
        tried = await self._attempt(adapter, test, run_number, directory, 1, task_id)
        return await self._finish(adapter, test, run_number, tried, []), tried.fault

    async def _attempt(
        self,
        adapter: Adapter,
        test: Test,
        run_number: int,
        directory: Path,
        attempt: int,
        task_id: str | None = None,
    ) -> _Tried:
        """One attempt at a run: the request executed through the adapter under the time limit;
        what came back, or why nothing did. Another attempt waits for its turn under the rate
        limit (the first one's is :meth:`perform`'s)."""
        if self._rate is not None and attempt > 1:
            await self._rate.acquire()
        workspace = None
        fresh = attempt == 1 and not self._resuming
        if test.workspace_fixture is not None:
            workspace = directory / workspace_path(test.id, run_number)
            await anyio.to_thread.run_sync(_copy_fixture, test.workspace_fixture, workspace, not fresh)
        request = self.build_request(test, run_number, workspace, task_id)
        task_id = request.task_id
        callers = self._callers
        on_event: Callable[[Event], None] | None = None
        if callers["atp_event"]:

            def on_event(event: Event) -> None:
                self._notify("atp_event", test=test, run_number=run_number, event=event)

        tried = _Tried(request, events_path(test.id, run_number), log_path(test.id, run_number))
        if not fresh:  # what an earlier attempt (or an interrupted run) left goes first
            _remove_files(directory / tried.events_file, directory / tried.log_file)
        trace = tried.trace = RunTrace(
            task_id,
            events_path=directory / tried.events_file,
            log_path=directory / tried.log_file,
            masker=self.masker,
            on_event=on_event,
            max_events=self.max_events,
            max_event_bytes=self.max_event_bytes,
            max_log_bytes=self.max_log_bytes,
        )
        timeout = tried.timeout = float(test.timeout_seconds)
        if self.agent.timeout is not None:
            timeout = tried.timeout = min(timeout, float(self.agent.timeout))
        tried.started_at = utcnow()
        started = time.perf_counter()
        returned: Any = _NOTHING
        entered: _Entered | None = None
        try:
            with anyio.move_on_after(timeout) as scope:
                if test.services:
                    entered = tried.entered = _Entered()
                    request = await self._enter_services(test, request, trace, entered)
                    entered.announced = True
                if callers["atp_run_started"] and attempt == 1:
                    self._notify("atp_run_started", test=test, run_number=run_number, request=request)
                returned = await adapter.execute(request, trace)
            tried.timed_out = scope.cancelled_caught and returned is _NOTHING
        except Exception as raised:
            exc = _single(raised)
            if trace.storage_error is not None:
                raise trace.storage_error from None
            tried.fault = infrastructure_fault(exc)
            if isinstance(exc, _ServiceFailed):
                tried.error, tried.could_not_run, tried.plugin_traceback = exc.message, True, exc.traceback
            elif isinstance(exc, AgentError):
                tried.error = self._agent_error(exc)
            elif isinstance(exc, AtpError):
                tried.error, tried.could_not_run = str(exc), True
            elif tried.fault is not None:
                tried.error, tried.could_not_run = tried.fault.reason, True
            else:
                tried.error = (
                    f"adapter {self.agent.type!r} of {self.plugins.owner('adapter', self.agent.type)} "
                    f"raised {type(exc).__name__}: {exc}"
                )
                tried.plugin_traceback = shorten(format_exception(exc), MAX_TRACEBACK_CHARS)
                tried.could_not_run = True
        finally:
            if entered is not None:
                if not entered.announced and callers["atp_run_started"] and attempt == 1:
                    self._notify("atp_run_started", test=test, run_number=run_number, request=request)
                await self._leave_services(entered, trace)
            trace.close()
        if trace.storage_error is not None:
            raise trace.storage_error
        tried.duration = time.perf_counter() - started
        tried.returned = returned
        return tried

    async def _finish(
        self, adapter: Adapter, test: Test, run_number: int, tried: _Tried, retries: list[Retry]
    ) -> RunResult:
        """The result of a run's last attempt: the response checked, evaluated and scored."""
        returned, trace, duration, timeout = tried.returned, tried.trace, tried.duration, tried.timeout
        task_id = tried.request.task_id
        error, could_not_run = tried.error, tried.could_not_run
        assert trace is not None, "every attempt has a trace"
        response: ATPResponse | None = None
        if isinstance(returned, ATPResponse):
            response = returned
        elif returned is not _NOTHING:
            error = (
                f"adapter {self.agent.type!r} of {self.plugins.owner('adapter', self.agent.type)} "
                f"returned {describe(returned)}, not an ATPResponse"
            )
            could_not_run = True
        if response is not None and response.task_id != task_id:
            error = (
                f"agent answered with task_id {response.task_id!r}, but the request's task_id was {task_id!r}"
            )
            response = None
        if tried.timed_out:
            error = f"timed out after {timeout:g} s; the agent was stopped"
            entered = tried.entered
            if entered is not None and entered.pending is not None:
                error = f"timed out after {timeout:g} s while service {entered.pending!r} was getting ready"
                could_not_run = True
        if response is None:
            response = ATPResponse(
                version=PROTOCOL_VERSION,
                task_id=task_id,
                status="timeout" if tried.timed_out else "failed",
                artifacts=[],
                metrics=trace.summary.metrics(round(duration, 6)),
                error=error,
            )
        else:
            metrics, problems = sane_metrics(response.metrics)
            if problems:
                response = msgspec.structs.replace(response, metrics=metrics)
                for problem in problems:
                    trace.warn(problem)
            if response.status != "completed":
                error = response.error or f"agent reported status {response.status!r}"
            elif response.error:
                trace.warn(f"the agent reported status 'completed' with an error: {shorten(response.error)}")
        if error is not None:
            if self.masker is not None:
                error = self.masker.text(error)  # before cutting: a cut must not split a secret
            error = shorten(error, MAX_ERROR_CHARS)

        checks: list[Check] = []
        quality: list[Check] = []
        ctx: EvalContext | None = None
        if not could_not_run:
            ctx = EvalContext(
                test=test,
                request=tried.request,
                response=response,
                trace=trace.trace(),
                workspace=_workspace(tried.request),
                agent_dir=adapter.artifact_dir(tried.request),
            )
            for assertion in test.assertions:
                produced, ok = await self._evaluate(assertion, ctx)
                if assertion.critical:
                    for item in produced:
                        item.details = {**(item.details or {}), "critical": True}
                could_not_run = could_not_run or not ok
                checks.extend(produced)
                if self._evaluator(assertion.type).category == "quality":
                    quality.extend(produced)

        score, breakdown = score_run(checks, quality, response, trace.summary, test.constraints, test.scoring)
        outcome: Outcome
        if could_not_run:
            outcome = "error"
        elif (
            response.status == "completed"
            and error is None
            and all(c.passed or c.skipped is not None for c in checks)
        ):
            outcome = "passed"
        else:
            outcome = "failed"
        return RunResult(
            test_id=test.id,
            run_number=run_number,
            task_id=task_id,
            outcome=outcome,
            status=response.status,
            score=score,
            score_breakdown=breakdown,
            duration_seconds=round(duration, 6),
            started_at=tried.started_at,
            checks=checks,
            metrics=response.metrics,
            error=error,
            warnings=trace.warnings,
            trace=trace.summary,
            events_file=tried.events_file if trace.events_written else None,
            log_file=tried.log_file if trace.log_written else None,
            log_tail=[shorten(line, MAX_ERROR_CHARS) for line in trace.log_tail]
            if outcome != "passed"
            else [],
            artifacts=response.artifacts,
            evaluation_usage=ctx.usage if ctx is not None else {},
            traceback=tried.plugin_traceback,
            retries=retries,
        )

    def record(self, test: Test, result: RunResult) -> None:
        """Store a finished run, then let the schedule, the budget, ``--fail-fast`` and the
        plugins know of it."""
        store = self.store
        assert store is not None, "run() creates the store"
        store.append(result)
        if self._schedule is not None:
            self._schedule.finished(test, result)  # at once after the append: the stored order decides
        if self._budget is not None:
            self._budget.spend(result)  # once spent, no new run starts; the runs in flight finish
        if self.fail_fast and result.outcome != "passed" and not self._failed_fast:
            self._failed_fast = True
            if self._runs_scope is not None:
                self._runs_scope.cancel()
        self._notify("atp_run_finished", result=result)
        self._test_progress(result)

    def _agent_error(self, exc: AgentError) -> str:
        """The reason of an agent's failure, with its evidence masked, then cut and escaped."""
        message = str(exc)
        evidence = getattr(exc, "evidence", None)
        if evidence is None:
            return message
        text = as_text(evidence)
        if self.masker is not None:
            text = self.masker.text(text)
        return f"{message}: '{printable(shorten(text))}'"

    def _test_progress(self, result: RunResult) -> None:
        left = self._remaining.get(result.test_id)
        if left is None:
            return
        keep = bool(self._callers["atp_test_finished"])
        if keep:
            self._finished_runs.setdefault(result.test_id, []).append(result)
        if left > 1:
            self._remaining[result.test_id] = left - 1
            return
        del self._remaining[result.test_id]
        if keep:
            runs = self._finished_runs.pop(result.test_id)
            planned = self._planned[result.test_id]
            entry, alpha = None, ALPHA
            if self.baseline is not None and self.baseline.suite == self.suite.name:
                entry = self.baseline.tests.get(result.test_id)
            if self._schedule is not None:
                alpha = self._schedule.alpha
            self._notify(
                "atp_test_finished",
                result=make_test_result(planned, runs, False, baseline=entry, alpha=alpha),
            )

    def _evaluator(self, name: str) -> Evaluator:
        evaluator = self._evaluators.get(name)
        if evaluator is None:
            evaluator_cls = self.plugins.evaluator(name)
            evaluator = evaluator_cls(self.evaluator_settings(evaluator_cls.settings_name()))
            evaluator.secrets = self.secrets
            self._evaluators[name] = evaluator
        return evaluator

    def _evaluator_timeout(self, name: str) -> float:
        limit = self._evaluator_limits.get(name)
        if limit is None:
            evaluator_cls = self.plugins.evaluator(name)
            value = self.evaluator_settings(evaluator_cls.settings_name()).get("timeout_seconds")
            limit = evaluator_cls.default_timeout
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
                limit = float(value)
            self._evaluator_limits[name] = limit
        return limit

    async def _evaluate(self, assertion: Assertion, ctx: EvalContext) -> tuple[list[Check], bool]:
        """The assertion's checks, named; ``False`` when the evaluator itself failed, returned
        something that is not a list of checks, or took longer than its time limit."""
        label = assertion.name or assertion.type
        limit = self._evaluator_timeout(assertion.type)
        evaluator = self._evaluator(assertion.type)
        failure: str | None = None
        details: dict[str, Any] | None = None
        produced: list[Check] = []
        with anyio.move_on_after(limit) as scope:
            try:
                if is_async(evaluator):
                    timer = StepTimer(evaluator.evaluate(ctx, assertion.config))
                    returned = await timer
                    self._warn_blocking(assertion.type, timer.longest)
                else:  # a plain ``def evaluate`` runs in a worker thread, off the event loop
                    returned = await anyio.to_thread.run_sync(
                        evaluator.evaluate, ctx, assertion.config, abandon_on_cancel=True
                    )
                produced = checked_result(self._evaluator_label(assertion.type), returned)
            except AtpError as exc:
                failure = str(exc)
                if not isinstance(exc, EvaluatorResultError):
                    failure = f"evaluator {assertion.type!r} could not check this run: {exc}"
                if isinstance(exc, CannotEvaluate) and exc.details:
                    details = dict(exc.details)
            except Exception as exc:
                failure = (
                    f"{self._evaluator_label(assertion.type)} could not check this run: "
                    f"{type(exc).__name__}: {exc}"
                )
                details = {"traceback": shorten(format_exception(exc), MAX_TRACEBACK_CHARS)}
        if scope.cancelled_caught:
            failure = (
                f"evaluator {assertion.type!r} did not finish within {limit:g} s "
                f"(evaluators.{type(evaluator).settings_name()}.timeout_seconds)"
            )
        if failure is not None:
            check = Check(name=label, passed=False, score=0.0, message=failure, details=details)
            return [check], False
        if assertion.name:
            if len(produced) == 1:
                produced[0].name = assertion.name
            else:
                for item in produced:
                    item.name = f"{assertion.name}:{item.name}"
        return produced, True

    def _evaluator_label(self, name: str) -> str:
        return f"evaluator {name!r} of {self.plugins.owner('evaluator', name)}"

    def _warn_blocking(self, name: str, longest: float) -> None:
        if longest < BLOCKING_STEP_SECONDS or name in self._warned_blocking:
            return
        self._warned_blocking.add(name)
        logger.warning(
            "evaluator %r of %s held the event loop for %.2f s in one step: runs in flight waited "
            "for it, whatever --parallel says. Do blocking work in a thread "
            "(await anyio.to_thread.run_sync(...)) or write 'def evaluate' (run in a thread)",
            name,
            self.plugins.owner("evaluator", name),
            longest,
        )


class _AdaptiveState:
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


class _Schedule:
    """The runs to make, in suite order, handed to workers as they ask: a fixed test's runs
    all at once (made as they are taken: a list would hold a pair per run), an adaptive test's
    first ``min_runs``, then one more for each finished run until its plan decides to stop.
    A worker that finds nothing to take while adaptive runs are in flight waits for their
    decisions."""

    def __init__(
        self, runner: Runner, tests: list[Test], done: Mapping[str, list[RunResult]] | None = None
    ) -> None:
        self._runner = runner
        self._done = done or {}
        self._adaptive: dict[str, _AdaptiveState] = {}
        entries = (
            runner.baseline.tests
            if runner.baseline is not None and runner.baseline.suite == runner.suite.name
            else {}
        )
        adaptive = [t for t in tests if runner.plan_of(t) is not None and runner.skip_of(t) is None]
        reference = runner.baseline_ref
        self.alpha = sequential_alpha(
            sum(1 for test in adaptive if test.id in entries),
            reference.correction if reference is not None else "holm",
        )
        for test in adaptive:
            plan = runner.plan_of(test)
            assert plan is not None
            entry = entries.get(test.id)
            state = self._adaptive[test.id] = _AdaptiveState(
                plan, entry.sample() if entry is not None else None
            )
            scores = []
            for run in self._done.get(test.id, ()):  # a resumed run's, in stored order
                state.sample = state.running.add(run.score)
                state.numbers.add(run.run_number)
                scores.append(run.score)
            state.started = state.finished = len(state.numbers)
            if scores and (
                state.started >= plan.max_runs or replay(plan, scores, state.baseline, self.alpha) is not None
            ):
                state.stopped = True  # decided at the same look as when it ran (runs in flight came after)
        self._base = self._first_runs(tests)
        self._more: deque[Test] = deque()
        self._in_flight = 0
        """Adaptive runs started whose decision is still to come."""
        self._changed: anyio.Event | None = None

    def _first_runs(self, tests: list[Test]) -> Iterator[tuple[Test, int | None]]:
        runner = self._runner
        for test in tests:
            if runner.skip_of(test) is not None:
                continue
            state = self._adaptive.get(test.id)
            if state is None:
                done = {run.run_number for run in self._done.get(test.id, ())}
                for number in runner._planned[test.id].share():
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
            budget = self._runner._budget
            if budget is not None and budget.exceeded:
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
                state.stopped = True
                left = self._runner._remaining
                if test.id in left:  # the runs still in flight are the ones still to finish
                    left[test.id] = state.started - state.finished + 1
            elif state.started + sum(1 for t in self._more if t.id == test.id) < state.plan.max_runs:
                self._more.append(test)
        if self._changed is not None:
            self._changed.set()
            self._changed = None


_NOTHING: Any = object()
"""What an adapter's ``execute`` returned before it returned."""


class _Tried:
    """One attempt at a run: its request and trace, what came back or why nothing did."""

    __slots__ = (
        "could_not_run", "duration", "entered", "error", "events_file", "fault", "log_file",
        "plugin_traceback", "request", "returned", "started_at", "timed_out", "timeout", "trace",
    )  # fmt: skip

    def __init__(self, request: ATPRequest, events_file: str, log_file: str) -> None:
        self.request = request
        self.events_file = events_file
        self.log_file = log_file
        self.trace: RunTrace | None = None
        self.returned: Any = _NOTHING
        self.error: str | None = None
        self.could_not_run = False
        self.timed_out = False
        self.timeout = 0.0
        self.plugin_traceback: str | None = None
        self.entered: _Entered | None = None
        self.fault: Fault | None = None
        self.duration = 0.0
        self.started_at = utcnow()


class _NotStarted(Exception):
    """A run whose turn (its rate limit's) came once the budget was spent: it is not made."""


def _after_retries(error: str, retries: list[Retry]) -> str:
    return f"{error} (after {len(retries)} {'retry' if len(retries) == 1 else 'retries'})"


def _remove_files(*paths: Path) -> None:
    """Remove what an earlier attempt (or an interrupted run) left where a run's files go: a
    file, a link, or a folder an agent put there; a failure is a :class:`StorageError`."""
    import shutil

    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot remove {path} for a new attempt at its run: {files.reason(exc)}"
            ) from None


class _ServiceFailed(Exception):
    """A service could not be made, started or entered for a run: the run is an error."""

    def __init__(self, message: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.traceback = traceback


class _Started:
    """One service of the suite: the instance, whether it started, or why it did not."""

    __slots__ = ("failure", "ready", "service")

    def __init__(self) -> None:
        self.service: Service | None = None
        self.ready = False
        self.failure: _ServiceFailed | None = None

    def failed(self, failure: _ServiceFailed) -> None:
        self.failure = failure


class _Entered:
    """The services entered for one run, and the one being entered."""

    __slots__ = ("announced", "contexts", "pending")

    def __init__(self) -> None:
        self.contexts: list[tuple[str, AbstractAsyncContextManager[ATPRequest]]] = []
        self.pending: str | None = None
        self.announced = False
        """Whether ``atp_run_started`` was called (a run whose services failed is announced
        as it ends, so that every run is announced once)."""


def _single(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one exception, else ``exc``."""
    inner = getattr(exc, "exceptions", None)  # an ExceptionGroup (a backport's on Python 3.10)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _discard(directory: Path) -> None:
    """Remove the run directory of a suite whose agent could not start (its header and
    process ledger only)."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


def _copy_fixture(fixture: Path, workspace: Path, replace: bool = False) -> None:
    """A fresh copy of a test's ``workspace_fixture`` for one run (links copied as links, so
    nothing outside the fixture is read); a failure is a :class:`StorageError`. ``replace``:
    what an earlier attempt left there goes first."""
    import shutil

    if replace:  # what an agent left there (a folder, a file, a link) goes, never followed
        _remove_files(workspace)
    try:
        shutil.copytree(fixture, workspace, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise StorageError(f"cannot copy the workspace fixture {fixture} to {workspace}: {exc}") from None


def _workspace(request: ATPRequest) -> Path | None:
    context = request.context
    if context is not None and context.workspace_path:
        return Path(context.workspace_path)
    return None
