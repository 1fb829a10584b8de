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
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import msgspec

from atp.core.adapter import Adapter
from atp.core.adaptive import Adaptive, decide
from atp.core.baseline import Baseline, sequential_alpha
from atp.core.config import ResolvedAgent
from atp.core.errors import AgentError, AtpError, PluginFailed, StorageError
from atp.core.evaluator import (
    CannotEvaluate,
    EvalContext,
    Evaluator,
    EvaluatorResultError,
    StepTimer,
    checked_result,
    describe,
    is_async,
)
from atp.core.ledger import ProcessLedger, activate, stop_abandoned
from atp.core.plugins import HookCall, Plugins, format_exception
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, Context, Event, sane_metrics
from atp.core.results import (
    BaselineRef,
    Check,
    Outcome,
    PlannedTest,
    PluginFailure,
    RunHeader,
    RunResult,
    RunStore,
    SuiteResults,
    make_test_result,
    new_run_id,
    utcnow,
)
from atp.core.scoring import score_run
from atp.core.secrets import Masker
from atp.core.service import Recorder, Service
from atp.core.stats import ALPHA, Running, Sample
from atp.core.suite import Assertion, Suite, Test, suite_fingerprint, test_fingerprint
from atp.core.text import as_text, masking, printable, shorten
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
LIFECYCLE_HOOKS = (
    "atp_suite_started",
    "atp_test_started",
    "atp_run_started",
    "atp_event",
    "atp_run_finished",
    "atp_test_finished",
    "atp_suite_finished",
)


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
            "%s raised in its %s hook: %s (the run goes on)", self.plugins.describe(plugin), hook_name, message
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
        if self.runs == "auto" or (self.runs is None and test.auto):
            return test.adaptive
        return None

    def runs_of(self, test: Test) -> int:
        """The runs planned for a test (under an adaptive plan, the most it may take)."""
        plan = self.plan_of(test)
        if plan is not None:
            return plan.max_runs
        return self.runs if isinstance(self.runs, int) else test.runs

    async def run(self) -> SuiteResults:
        """Run everything; returns the results as the run directory holds them."""
        self._callers = {name: self.plugins.callers(name) for name in LIFECYCLE_HOOKS}
        self._services_lock = anyio.Lock()
        planned = [
            PlannedTest(
                id=t.id,
                name=t.name,
                description=t.description,
                tags=list(t.tags),
                runs=self.runs_of(t),
                skip=t.skip,
                pass_rule=t.pass_rule,
                adaptive=self.plan_of(t),
                fingerprint=test_fingerprint(t),
            )
            for t in self.tests
        ]
        self._planned = {p.id: p for p in planned}
        header = RunHeader(
            run_id=new_run_id(),
            suite=self.suite.name,
            suite_file=str(self.suite.path) if self.suite.path else None,
            agent=self.agent.name,
            agent_type=self.agent.type,
            started_at=utcnow(),
            deselected=self.deselected,
            tests=planned,
            suite_fingerprint=suite_fingerprint(self.tests),
            baseline=self.baseline_ref if self.baseline is not None else None,
        )
        for message in stop_abandoned(self.run_root):
            logger.warning(message)
        store = self.store = RunStore.create(self.run_root, header, self.masker, self.baseline)
        schedule = self._schedule = _Schedule(self, self.tests)
        for test in self.tests:
            if test.skip is None:
                self._remaining[test.id] = self.runs_of(test)
        total = sum(self.runs_of(t) for t in self.tests if t.skip is None)
        adapter: Adapter | None = None
        interrupted = True
        started = False
        processes = ProcessLedger.create(store.directory)
        try:
            with activate(processes), masking(self.masker):
                try:
                    adapter = self._adapter_step("could not be created", self.agent.create_adapter)
                    await self._adapter_call("failed to start", adapter.start)
                    started = True
                    self._notify("atp_suite_started", header=header, directory=store.directory)
                    await self._run_all(adapter, schedule, total)
                    interrupted = self._stopped_by is not None or self._storage_error is not None
                finally:
                    if adapter is not None:
                        with anyio.CancelScope(shield=True):
                            await self._close(adapter)
                    if self._services:
                        with anyio.CancelScope(shield=True):
                            await self._close_services()
                    if self._evaluators:
                        with anyio.CancelScope(shield=True):
                            await self._close_evaluators()
        finally:
            if not started:  # the agent could not start: nothing ran, no run directory is left
                store.close()
                _discard(store.directory)
            else:
                header.finished_at = utcnow()
                header.interrupted = interrupted
                header.stopped_by = self._stop_reason()
                header.plugin_failures = list(self.plugin_failures)
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

    def _stop_reason(self) -> str | None:
        if self._stopped_by is not None:
            return signal.Signals(self._stopped_by).name
        if self._storage_error is not None:
            return "storage"
        if self._failed_fast:
            return "fail-fast"
        return None

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

    async def _enter_services(self, test: Test, request: ATPRequest, trace: RunTrace, entered: _Entered) -> ATPRequest:
        """Enter the test's services for one run, in order; the request each yields goes to the
        next, the last one's to the agent."""
        for use in test.services:
            entered.pending = use.key
            service = await self._service(use.key)
            try:
                context = service.run(use.config, request, Recorder(trace, use.key))
                yielded = await context.__aenter__()
            except Exception as exc:
                raise self._service_failure(use.key, "could not get ready for the run", _single(exc)) from None
            entered.contexts.append((use.key, context))
            if not isinstance(yielded, ATPRequest) or yielded.task_id != request.task_id:
                what = (
                    f"changed the request's task_id to {yielded.task_id!r}"
                    if isinstance(yielded, ATPRequest)
                    else f"yielded {describe(yielded)}, not an ATPRequest"
                )
                raise _ServiceFailed(f"service {use.key!r} of {self.plugins.owner('service', use.key)} {what}")
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
                    self._hook_failed(self.plugins.owner_name("service", key) or key, f"service {key!r}", inner)
            if scope.cancelled_caught:
                trace.warn(f"service {key!r} did not finish leaving the run within {SERVICE_LEAVE_SECONDS:g} s")

    async def _close_services(self) -> None:
        """Close every service made (even one whose start failed); a failure there is warned
        about and recorded, the results stand."""
        for key, started in self._services.items():
            if started.service is None:
                continue
            try:
                await started.service.aclose()
            except Exception as exc:
                self._hook_failed(self.plugins.owner_name("service", key) or key, f"service {key!r} aclose", _single(exc))

    async def _close_evaluators(self) -> None:
        """Let every evaluator made release what it holds (a judge's connections), each within
        :data:`SERVICE_LEAVE_SECONDS`; a failure is warned about and recorded, the results stand."""
        for name, evaluator in self._evaluators.items():
            try:
                with anyio.fail_after(SERVICE_LEAVE_SECONDS):
                    await evaluator.aclose()
            except Exception as exc:
                self._hook_failed(self.plugins.owner_name("evaluator", name) or name, f"evaluator {name!r} aclose", _single(exc))

    async def _run_all(self, adapter: Adapter, items: _Schedule, total: int) -> None:
        runs = self._runs_scope = anyio.CancelScope()
        async with anyio.create_task_group() as outer:
            if threading.current_thread() is threading.main_thread():
                outer.start_soon(self._watch_signals, runs, adapter)
            with runs:
                async with anyio.create_task_group() as workers:
                    for _ in range(min(self._fit_parallel(), total)):
                        workers.start_soon(self._worker, adapter, items)
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

    async def _watch_signals(self, runs: anyio.CancelScope, adapter: Adapter) -> None:
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
                    adapter.abort()
                except Exception as exc:
                    logger.warning("adapter %r could not abort its agents: %s", self.agent.type, exc)

    async def _worker(self, adapter: Adapter, items: _Schedule) -> None:
        while True:
            item = await items.take()
            if item is None:
                return
            test, run_number = item
            try:
                await self.run_one(adapter, test, run_number)
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

    def build_request(self, test: Test, run_number: int, workspace: Path | None = None) -> ATPRequest:
        return ATPRequest(
            version=PROTOCOL_VERSION,
            task_id=str(uuid.uuid4()),
            task=test.task,
            constraints=test.constraints,
            context=Context(workspace_path=str(workspace)) if workspace is not None else None,
            metadata={
                "test_id": test.id,
                "run_number": run_number,
                "total_runs": self.runs_of(test),
                **({"adaptive": True} if self.plan_of(test) is not None else {}),
                "suite": self.suite.name,
                "run_id": self.store.directory.name if self.store is not None else "",
            },
        )

    async def run_one(self, adapter: Adapter, test: Test, run_number: int) -> RunResult:
        store = self.store
        assert store is not None, "run() creates the store"
        workspace = None
        if test.workspace_fixture is not None:
            workspace = store.workspace(test.id, run_number)
            await anyio.to_thread.run_sync(_copy_fixture, test.workspace_fixture, workspace)
        request = self.build_request(test, run_number, workspace)
        task_id = request.task_id
        callers = self._callers
        if run_number == 1 and callers["atp_test_started"]:
            self._notify("atp_test_started", test=test)
        on_event: Callable[[Event], None] | None = None
        if callers["atp_event"]:

            def on_event(event: Event) -> None:
                self._notify("atp_event", test=test, run_number=run_number, event=event)

        events_file = store.events_file(test.id, run_number)
        log_file = store.log_file(test.id, run_number)
        trace = RunTrace(
            task_id,
            events_path=store.directory / events_file,
            log_path=store.directory / log_file,
            masker=self.masker,
            on_event=on_event,
            max_events=self.max_events,
            max_event_bytes=self.max_event_bytes,
            max_log_bytes=self.max_log_bytes,
        )
        timeout = float(test.timeout_seconds)
        if self.agent.timeout is not None:
            timeout = min(timeout, float(self.agent.timeout))
        started_at = utcnow()
        started = time.perf_counter()
        returned: Any = _NOTHING
        response: ATPResponse | None = None
        error: str | None = None
        plugin_traceback: str | None = None
        could_not_run = False
        timed_out = False
        entered: _Entered | None = None
        try:
            with anyio.move_on_after(timeout) as scope:
                if test.services:
                    entered = _Entered()
                    request = await self._enter_services(test, request, trace, entered)
                    entered.announced = True
                if callers["atp_run_started"]:
                    self._notify("atp_run_started", test=test, run_number=run_number, request=request)
                returned = await adapter.execute(request, trace)
            timed_out = scope.cancelled_caught and returned is _NOTHING
        except Exception as raised:
            exc = _single(raised)
            if trace.storage_error is not None:
                raise trace.storage_error from None
            if isinstance(exc, _ServiceFailed):
                error, could_not_run, plugin_traceback = exc.message, True, exc.traceback
            elif isinstance(exc, AgentError):
                error = self._agent_error(exc)
            elif isinstance(exc, AtpError):
                error, could_not_run = str(exc), True
            else:
                error = (
                    f"adapter {self.agent.type!r} of {self.plugins.owner('adapter', self.agent.type)} "
                    f"raised {type(exc).__name__}: {exc}"
                )
                plugin_traceback = shorten(format_exception(exc), MAX_TRACEBACK_CHARS)
                could_not_run = True
        finally:
            if entered is not None:
                if not entered.announced and callers["atp_run_started"]:  # every run is announced once
                    self._notify("atp_run_started", test=test, run_number=run_number, request=request)
                await self._leave_services(entered, trace)
            trace.close()
        if trace.storage_error is not None:
            raise trace.storage_error
        duration = time.perf_counter() - started

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
                f"agent answered with task_id {response.task_id!r}, "
                f"but the request's task_id was {task_id!r}"
            )
            response = None
        if timed_out:
            error = f"timed out after {timeout:g} s; the agent was stopped"
            if entered is not None and entered.pending is not None:
                error = f"timed out after {timeout:g} s while service {entered.pending!r} was getting ready"
                could_not_run = True
        if response is None:
            response = ATPResponse(
                version=PROTOCOL_VERSION,
                task_id=task_id,
                status="timeout" if timed_out else "failed",
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
                request=request,
                response=response,
                trace=trace.trace(),
                workspace=_workspace(request),
                agent_dir=adapter.artifact_dir(request),
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

        score, breakdown = score_run(
            checks, quality, response, trace.summary, test.constraints, test.scoring
        )
        outcome: Outcome
        if could_not_run:
            outcome = "error"
        elif response.status == "completed" and error is None and all(c.passed or c.skipped is not None for c in checks):
            outcome = "passed"
        else:
            outcome = "failed"
        result = RunResult(
            test_id=test.id,
            run_number=run_number,
            task_id=task_id,
            outcome=outcome,
            status=response.status,
            score=score,
            score_breakdown=breakdown,
            duration_seconds=round(duration, 6),
            started_at=started_at,
            checks=checks,
            metrics=response.metrics,
            error=error,
            warnings=trace.warnings,
            trace=trace.summary,
            events_file=events_file if trace.events_written else None,
            log_file=log_file if trace.log_written else None,
            log_tail=[shorten(line, MAX_ERROR_CHARS) for line in trace.log_tail] if outcome != "passed" else [],
            artifacts=response.artifacts,
            evaluation_usage=ctx.usage if ctx is not None else {},
            traceback=plugin_traceback,
        )
        store.append(result)
        if self._schedule is not None:
            self._schedule.finished(test, result)  # at once after the append: the stored order decides
        if self.fail_fast and outcome != "passed" and not self._failed_fast:
            self._failed_fast = True
            if self._runs_scope is not None:
                self._runs_scope.cancel()
        self._notify("atp_run_finished", result=result)
        self._test_progress(result)
        return result

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
                "atp_test_finished", result=make_test_result(planned, runs, False, baseline=entry, alpha=alpha)
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

    __slots__ = ("baseline", "finished", "plan", "running", "started", "stopped")

    def __init__(self, plan: Adaptive, baseline: Sample | None) -> None:
        self.plan = plan
        self.baseline = baseline
        self.running = Running()
        self.started = 0
        self.finished = 0
        self.stopped = False


class _Schedule:
    """The runs to make, in suite order, handed to workers as they ask: a fixed test's runs
    all at once (made as they are taken: a list would hold a pair per run), an adaptive test's
    first ``min_runs``, then one more for each finished run until its plan decides to stop.
    A worker that finds nothing to take while adaptive runs are in flight waits for their
    decisions."""

    def __init__(self, runner: Runner, tests: list[Test]) -> None:
        self._runner = runner
        self._adaptive: dict[str, _AdaptiveState] = {}
        entries = runner.baseline.tests if runner.baseline is not None and runner.baseline.suite == runner.suite.name else {}
        for test in tests:
            plan = runner.plan_of(test)
            if plan is not None and test.skip is None:
                entry = entries.get(test.id)
                self._adaptive[test.id] = _AdaptiveState(plan, entry.sample() if entry is not None else None)
        reference = runner.baseline_ref
        self.alpha = sequential_alpha(
            sum(1 for test_id in self._adaptive if test_id in entries),
            reference.correction if reference is not None else "holm",
        )
        self._base = self._first_runs(tests)
        self._more: deque[Test] = deque()
        self._in_flight = 0
        """Adaptive runs started whose decision is still to come."""
        self._changed: anyio.Event | None = None

    def _first_runs(self, tests: list[Test]) -> Iterator[tuple[Test, int | None]]:
        for test in tests:
            if test.skip is not None:
                continue
            state = self._adaptive.get(test.id)
            if state is None:
                for number in range(1, self._runner.runs_of(test) + 1):
                    yield test, number
            else:
                for _ in range(state.plan.min_runs):
                    yield test, None

    async def take(self) -> tuple[Test, int] | None:
        """The next run to make, or ``None`` when there will be no more."""
        while True:
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
            if state.stopped:
                continue
            state.started += 1
            self._in_flight += 1
            return test, state.started

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


def _copy_fixture(fixture: Path, workspace: Path) -> None:
    """A fresh copy of a test's ``workspace_fixture`` for one run (links copied as links, so
    nothing outside the fixture is read); a failure is a :class:`StorageError`."""
    import shutil

    try:
        shutil.copytree(fixture, workspace, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise StorageError(f"cannot copy the workspace fixture {fixture} to {workspace}: {exc}") from None


def _workspace(request: ATPRequest) -> Path | None:
    context = request.context
    if context is not None and context.workspace_path:
        return Path(context.workspace_path)
    return None
