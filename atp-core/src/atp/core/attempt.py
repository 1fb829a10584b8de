"""One run: the request executed through the adapter, the response checked, evaluated and scored.

:class:`RunMaker` makes a run's result, its events and log written below a folder (nothing is
stored: the runner stores it). An attempt builds the request (a fresh task_id; the test's
constraints; metadata), enters the test's services, executes the request under the time limit
(the test's, or the agent's if shorter) and closes the trace; a fault of the infrastructure
(:mod:`atp.core.retry`) gets another attempt after a wait while retries are left, and the last
attempt is finished: its response checked against the request, evaluated, scored. An agent that
times out, crashes, lies or floods fails its own run with a reason.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio

from atp.core.adapter import Adapter
from atp.core.answer import MAX_ERROR_CHARS, NOTHING, Tried, expectation_check, read_answer
from atp.core.artifacts import ArtifactContents, Where, verify_artifacts
from atp.core.config import ResolvedAgent
from atp.core.errors import AgentError, AtpError, StorageError, single_exception
from atp.core.evaluation import Evaluation
from atp.core.evaluator import EvalContext
from atp.core.hooks import Notifier
from atp.core.ledger import ProcessLedger
from atp.core.limits import BudgetMeter, RateLimiter
from atp.core.options import RunOptions
from atp.core.plan import RunPlan
from atp.core.plugins import Plugins, format_exception
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    Context,
    Event,
    FileArtifact,
    ReferenceArtifact,
)
from atp.core.results import Check, Outcome, Retry, RunResult, events_path, log_path, utcnow, workspace_path
from atp.core.retry import Fault, backoff, infrastructure_fault
from atp.core.run_limits import RunLimits, canceller
from atp.core.scoring import score_run
from atp.core.secrets import Masker
from atp.core.service_runs import Entered, ServiceFailed, Services
from atp.core.suite import Test
from atp.core.text import as_text, printable, shorten
from atp.core.trace import RunTrace
from atp.core.tree import copy_tree, remove_tree

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_KEPT_FOLDERS",
    "MAX_TRACEBACK_CHARS",
    "Gate",
    "NotStarted",
    "RunMaker",
    "Tried",
    "after_retries",
]

MAX_TRACEBACK_CHARS = 8000
"""A plugin's traceback is kept up to this many characters."""
MAX_KEPT_FOLDERS = 100
"""The most run folders (made for runs of an agent with a folder per run, not copies of a
fixture) kept for runs that did not pass, per suite and agent; later ones are removed too
(``--keep-workspaces`` keeps every one)."""


class NotStarted(Exception):
    """A run whose turn (under the rate limit) came once the budget was spent: not made."""


class Gate:
    """Whether runs may start: their turn under the rate limit, and the budget."""

    def __init__(self, rate: RateLimiter | None, budget: BudgetMeter | None) -> None:
        self.rate = rate
        self.budget = budget

    async def turn(self) -> None:
        """Wait for the next start's turn under the rate limit (every worker shares it)."""
        if self.rate is not None:
            await self.rate.acquire()

    async def first_turn(self) -> None:
        """A run's first attempt's turn; :class:`NotStarted` when it came too late."""
        if self.rate is not None:
            await self.rate.acquire()
            if self.spent():
                raise NotStarted

    def spent(self) -> bool:
        return self.budget is not None and self.budget.exceeded


def after_retries(error: str, retries: list[Retry]) -> str:
    """A run's error once its retries were spent."""
    return f"{error} (after {len(retries)} retr{'y' if len(retries) == 1 else 'ies'})"


def build_request(
    test: Test,
    run_number: int,
    plan: RunPlan,
    where: tuple[str, str],
    workspace: Path | None,
    task_id: str | None,
    environment: Mapping[str, str] | None = None,
) -> ATPRequest:
    """The request of one run; ``where``: the suite's name and the run's id; ``environment``:
    what its ``context.environment`` carries (the agent's ``env`` and ``secrets``)."""
    suite, run_id = where
    context = None
    if workspace is not None or environment:
        context = Context(
            workspace_path=str(workspace) if workspace is not None else None,
            environment=dict(environment) if environment else None,
        )
    return ATPRequest(
        version=PROTOCOL_VERSION,
        task_id=task_id or str(uuid.uuid4()),
        task=test.task,
        constraints=test.constraints,
        context=context,
        metadata={
            "test_id": test.id,
            "run_number": run_number,
            "total_runs": plan.runs_of(test),
            **({"adaptive": True} if plan.plan_of(test) is not None else {}),
            "suite": suite,
            "run_id": run_id,
        },
    )


class RunMaker:
    """Makes the runs of one suite against one agent (see the module)."""

    def __init__(
        self,
        plugins: Plugins,
        agent: ResolvedAgent,
        options: RunOptions,
        masker: Masker | None,
        stages: tuple[Services, Evaluation, Notifier],
        gate: Gate,
        request_of: Callable[[Test, int, Path | None, str | None], ATPRequest],
    ) -> None:
        """``stages``: the services around each run, the evaluators, the lifecycle hooks;
        ``request_of``: a run's request (test, run number, workspace, task id)."""
        self.plugins = plugins
        self.agent = agent
        self.options = options
        self.masker = masker
        self.services, self.evaluation, self.notify = stages
        self.gate = gate
        self.request_of = request_of
        self.resuming = False
        """Whether the run directory may hold what an interrupted run left (a resume)."""
        self.processes: ProcessLedger | None = None
        """The process ledger of the run in progress (the runner's), for evaluators that start
        processes (:attr:`~atp.core.evaluator.EvalContext.processes`)."""
        self.kept = 0
        """How many run folders of runs that did not pass are kept (:meth:`tidy`)."""

    async def perform(self, adapter: Adapter, test: Test, run_number: int, directory: Path) -> RunResult:
        """One run's result, its events and log written below ``directory``: the request
        executed through the adapter (again after each fault of the infrastructure while
        retries are left), the response checked, evaluated and scored. Nothing is stored. A run
        whose turn (under the rate limit) comes once the budget is spent is not made
        (:class:`NotStarted`)."""
        await self.gate.first_turn()
        if run_number == 1:
            self.notify("atp_test_started", test=test)
        retries: list[Retry] = []
        attempt = 1
        while True:
            tried = await self.attempt(adapter, test, run_number, directory, attempt)
            wait = self.next_attempt(attempt, tried.fault, retries)
            if wait is None:
                break
            await anyio.sleep(wait)
            attempt += 1
        if tried.fault is not None and retries:
            tried.error = after_retries(tried.error or tried.fault.reason, retries)
        result = await self.finish(adapter, test, run_number, tried, retries)
        await self.tidy(adapter, test, directory, result)
        return result

    async def perform_once(
        self, adapter: Adapter, test: Test, run_number: int, directory: Path, task_id: str | None = None
    ) -> tuple[RunResult, Fault | None]:
        """One attempt at a run and its result, with the fault of the infrastructure it met, if
        any, for the caller to decide on another attempt (a cluster worker's runs: ATP decides)."""
        tried = await self.attempt(adapter, test, run_number, directory, 1, task_id)
        # (no tidy: a cluster worker removes the whole folder of the run once it is shipped)
        return await self.finish(adapter, test, run_number, tried, []), tried.fault

    def next_attempt(
        self, attempt: int, fault: Fault | None, retries: list[Retry], where: str | None = None
    ) -> float | None:
        """The wait before another attempt at a run whose attempt number ``attempt`` met
        ``fault`` (recorded in ``retries``); ``None`` when there is none: no fault, no retries
        left, or a spent budget."""
        if fault is None or attempt > self.options.retries or self.gate.spent():
            return None
        wait = backoff(attempt, self.options.retry_backoff, fault.retry_after)
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

    # --- one attempt -------------------------------------------------------------------

    async def attempt(
        self,
        adapter: Adapter,
        test: Test,
        run_number: int,
        directory: Path,
        attempt: int,
        task_id: str | None = None,
    ) -> Tried:
        """One attempt at a run: the request executed through the adapter under the time limit;
        what came back, or why nothing did. Another attempt waits for its turn under the rate
        limit (the first one's is :meth:`perform`'s)."""
        if attempt > 1:
            await self.gate.turn()
        fresh = attempt == 1 and not self.resuming
        workspace = None
        if test.workspace_fixture is not None or adapter.folder_per_run:
            # (absolute: the agent gets it, and a relative --run-dir is relative to ATP's folder)
            workspace = Path(os.path.abspath(directory / workspace_path(test.id, run_number)))
            if test.workspace_fixture is not None:
                await anyio.to_thread.run_sync(copy_fixture, test.workspace_fixture, workspace, not fresh)
            elif fresh:
                make_folder(workspace)  # (one mkdir, on the event loop: cheaper than a thread's round trip)
            else:
                await anyio.to_thread.run_sync(make_folder, workspace, True)
        tried = Tried(
            self.request_of(test, run_number, workspace, task_id),
            events_path(test.id, run_number),
            log_path(test.id, run_number),
        )
        if not fresh:  # what an earlier attempt (or an interrupted run) left goes first
            remove_paths(directory / tried.events_file, directory / tried.log_file)
        tried.trace = self._trace(test, run_number, tried, directory)
        tried.timeout = float(test.timeout_seconds)
        if self.agent.timeout is not None:
            tried.timeout = min(tried.timeout, float(self.agent.timeout))
        tried.started_at = utcnow()
        started = time.perf_counter()
        await self._execute(adapter, test, run_number, tried, announce=attempt == 1)
        tried.duration = time.perf_counter() - started
        return tried

    def _trace(self, test: Test, run_number: int, tried: Tried, directory: Path) -> RunTrace:
        on_event: Callable[[Event], None] | None = None
        if self.notify.wants("atp_event"):
            notify = self.notify

            def on_event(event: Event) -> None:
                notify("atp_event", test=test, run_number=run_number, event=event)

        options = self.options
        return RunTrace(
            tried.request.task_id,
            events_path=directory / tried.events_file,
            log_path=directory / tried.log_file,
            masker=self.masker,
            on_event=on_event,
            max_events=options.max_events,
            max_event_bytes=options.max_event_bytes,
            max_log_bytes=options.max_log_bytes,
        )

    async def _execute(
        self, adapter: Adapter, test: Test, run_number: int, tried: Tried, *, announce: bool
    ) -> None:
        """The request through the test's services and the adapter, under the time limit."""
        trace = tried.trace
        assert trace is not None
        request = tried.request
        entered: Entered | None = None
        try:
            with anyio.move_on_after(tried.timeout) as scope:
                if RunLimits.wanted(test.constraints):  # (the canceller only when there are limits)
                    tried.limits = RunLimits(test.constraints, canceller(scope))
                    trace.watch(tried.limits)
                if test.services:
                    entered = tried.entered = Entered()
                    request = await self.services.enter(test, request, trace, entered)
                    entered.announced = True
                if announce:
                    self.notify(
                        "atp_run_started", test=test, run_number=run_number, request=self.for_hooks(request)
                    )
                tried.returned = await adapter.execute(request, trace)
            passed = tried.limits is not None and tried.limits.passed is not None
            tried.timed_out = scope.cancelled_caught and tried.returned is NOTHING and not passed
        except Exception as raised:
            if trace.storage_error is not None:
                raise trace.storage_error from None
            self._failed(tried, single_exception(raised))
        finally:
            trace.watch(None)  # the limits hold while the agent runs: not over what services record after
            if entered is not None:
                if not entered.announced and announce:
                    self.notify(
                        "atp_run_started", test=test, run_number=run_number, request=self.for_hooks(request)
                    )
                await self.services.leave(entered, trace)
            trace.close()
        if trace.storage_error is not None:
            raise trace.storage_error

    def for_hooks(self, request: ATPRequest) -> ATPRequest:
        """``request`` as plugins' hooks get it: with the secrets of its ``context.environment``
        masked (the agent gets them; nothing else of ATP's does)."""
        context = request.context
        if context is None or not context.environment or self.masker is None:
            return request
        masked: ATPRequest = self.masker.value(request)
        return masked

    def _failed(self, tried: Tried, exc: BaseException) -> None:
        """Why an attempt brought nothing back: a service, the agent, the infrastructure or the
        adapter itself."""
        tried.fault = infrastructure_fault(exc)
        if isinstance(exc, ServiceFailed):
            tried.error, tried.could_not_run, tried.plugin_traceback = exc.message, True, exc.traceback
        elif isinstance(exc, AgentError):
            tried.error = self._agent_error(exc)
        elif isinstance(exc, AtpError):
            tried.error, tried.could_not_run = str(exc), True
        elif tried.fault is not None:
            tried.error, tried.could_not_run = tried.fault.reason, True
        else:
            tried.error = (
                f"adapter {self.agent.type!r} of {self._adapter_owner()} raised {type(exc).__name__}: {exc}"
            )
            tried.plugin_traceback = shorten(format_exception(exc), MAX_TRACEBACK_CHARS, self.masker)
            tried.could_not_run = True

    def _agent_error(self, exc: AgentError) -> str:
        """The reason of an agent's failure, with its evidence masked, then cut and escaped."""
        message = str(exc)
        evidence = getattr(exc, "evidence", None)
        if evidence is not None:
            text = as_text(evidence)
            if self.masker is not None:
                text = self.masker.text(text)
            message += f": '{printable(shorten(text))}'"
        hint = getattr(exc, "hint", None)
        return f"{message}; {hint}" if hint else message

    def _adapter_owner(self) -> str:
        return self.plugins.owner("adapter", self.agent.type)

    def _adapter_named(self) -> str:
        return f"adapter {self.agent.type!r} of {self._adapter_owner()}"

    # --- the result --------------------------------------------------------------------

    async def finish(
        self, adapter: Adapter, test: Test, run_number: int, tried: Tried, retries: list[Retry]
    ) -> RunResult:
        """The result of a run's last attempt: the response checked, evaluated and scored."""
        trace = tried.trace
        assert trace is not None, "every attempt has a trace"
        answer = read_answer(tried, test, self.masker, self._adapter_named)
        response, error, could_not_run = answer.response, answer.error, answer.could_not_run
        checks: list[Check] = []
        quality: list[Check] = []
        ctx: EvalContext | None = None
        if not could_not_run:
            where = Where(_workspace(tried.request), adapter.artifact_dir(tried.request))
            contents, error = await self._verified(response, error, trace, where)
            ctx = EvalContext(
                test=test,
                request=tried.request,
                response=response,
                trace=trace.trace(),
                workspace=where.workspace,
                agent_dir=where.agent_dir,
                masker=self.masker,
                processes=self.processes,
            )
            ctx.contents = contents
            ctx.duration, ctx.suite_dir = tried.duration, self.evaluation.suite_dir
            checks, quality, evaluated = await self.evaluation.check(test, ctx)
            could_not_run = not evaluated
            if test.expect is not None:
                checks.insert(0, expectation_check(test.expect, answer, self.masker))
        score, breakdown = score_run(
            checks, quality, response, trace.summary, test.constraints, test.scoring, expected=answer.expected
        )
        outcome: Outcome
        if could_not_run:
            outcome = "error"
        elif (
            (response.status == "completed" or answer.expected)
            and error is None
            and all(c.passed or c.skipped is not None for c in checks)
        ):
            outcome = "passed"
        else:
            outcome = "failed"
        return RunResult(
            test_id=test.id,
            run_number=run_number,
            task_id=tried.request.task_id,
            outcome=outcome,
            status=response.status,
            score=score,
            score_breakdown=breakdown,
            duration_seconds=round(tried.duration, 6),
            started_at=tried.started_at,
            checks=checks,
            metrics=response.metrics,
            error=error,
            error_code=answer.code,
            error_details=answer.details,
            trace_id=answer.trace_id,
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

    async def tidy(self, adapter: Adapter, test: Test, directory: Path, result: RunResult) -> None:
        """After a run (its evaluators done), the folder ATP made for it (an agent with a
        folder per run; a copy of a test's ``workspace_fixture`` is always kept): removed when
        the run passed, unless ``--keep-workspaces``, or when the agent left nothing in it;
        kept as the agent left it when the run did not pass, for at most
        :data:`MAX_KEPT_FOLDERS` runs (later ones are removed, with a warning saying so)."""
        if test.workspace_fixture is not None or not adapter.folder_per_run:
            return
        folder = directory / workspace_path(test.id, result.run_number)
        try:  # the usual end, at the cost of one call: the agent left nothing there
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass  # (not empty; or a link or a file in its place: tidy_folder says)
        keep = self.options.keep_workspaces
        bounded = not keep and result.outcome != "passed"
        if bounded and self.kept < MAX_KEPT_FOLDERS:
            keep = True
            self.kept += 1  # (counted before the wait: runs finishing at once stay within the bound)
        kept, problem = await anyio.to_thread.run_sync(tidy_folder, folder, keep)
        if bounded and keep and not kept:
            self.kept -= 1  # (it was gone meanwhile)
        if problem is not None:
            result.warnings.append(
                shorten(f"ATP could not remove the run's folder {problem}", MAX_ERROR_CHARS)
            )
        elif bounded and not keep:
            result.warnings.append(
                f"ATP removed the run's folder {folder}: the folders of at most {MAX_KEPT_FOLDERS} runs that "
                "did not pass are kept (--keep-workspaces keeps every one)"
            )

    async def _verified(
        self, response: ATPResponse, error: str | None, trace: RunTrace, where: Where
    ) -> tuple[ArtifactContents | None, str | None]:
        """The response's file and reference artifacts checked against what the agent declared
        of them (``size_bytes``, ``content_hash``) and their inline content decoded, on a worker
        thread (:func:`atp.core.artifacts.verify_artifacts`): a mismatch fails the run, naming
        both values; what could not be checked is a warning. The content found, for evaluators."""
        if not any(isinstance(a, (FileArtifact, ReferenceArtifact)) for a in response.artifacts):
            return None, error
        found = await anyio.to_thread.run_sync(
            verify_artifacts, response.artifacts, where, self.masker, abandon_on_cancel=True
        )
        for warning in found.warnings:
            trace.warn(warning)
        reason = found.reason
        if reason is not None:
            if self.masker is not None:
                reason = self.masker.text(reason)  # (what it quotes is masked already; so is error)
            error = shorten(reason if error is None else f"{reason}; {error}", MAX_ERROR_CHARS)
        return found.contents, error


def remove_paths(*paths: Path) -> None:
    """Remove what an earlier attempt (or an interrupted run) left where a run's files go: a
    file, a link, or a folder an agent put there (never followed); a failure is a
    :class:`~atp.core.errors.StorageError`."""
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                left = remove_tree(path)
                if left is not None:
                    raise StorageError(f"cannot remove {path} for a new attempt at its run: {left}")
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot remove {path} for a new attempt at its run: {exc.strerror or exc}"
            ) from None


def make_folder(folder: Path, replace: bool = False) -> None:
    """A fresh, empty folder of a run's own (an agent with a folder per run); a failure is a
    :class:`~atp.core.errors.StorageError`. ``replace``: what an earlier attempt left there
    goes first."""
    if replace:
        remove_paths(folder)
    try:
        try:
            folder.mkdir()
        except FileNotFoundError:  # (the run's first: workspaces/ is made too)
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir()
    except OSError as exc:
        raise StorageError(f"cannot make the run's folder {folder}: {exc.strerror or exc}") from None


def tidy_folder(folder: Path, keep: bool) -> tuple[bool, str | None]:
    """Keep (``keep``) or remove a run's folder after its run; an empty one is removed anyway.
    Whether it is kept, and what could not be removed (``None``: nothing). Nothing the agent
    put there is followed: a link (or a file) in the folder's place is removed itself, and the
    tree is removed by :func:`atp.core.tree.remove_tree`. (Blocking.)"""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return False, None
    except OSError as exc:
        return True, f"{folder}: {exc.strerror or exc}"
    if not stat.S_ISDIR(mode):  # the agent replaced its folder with a link or a file
        if keep:
            return True, None
        try:
            os.unlink(folder)
        except OSError as exc:
            return True, f"{folder}: {exc.strerror or exc}"
        return False, None
    if keep:
        try:
            os.rmdir(folder)  # (only when the agent left nothing in it)
        except OSError:
            return True, None
        return False, None
    problem = remove_tree(folder)
    return problem is not None, problem


def copy_fixture(fixture: Path, workspace: Path, replace: bool = False) -> None:
    """A fresh copy of a test's ``workspace_fixture`` for one run (links copied as links, so
    nothing outside the fixture is read); a failure is a
    :class:`~atp.core.errors.StorageError`. ``replace``: what an earlier attempt left there goes
    first."""
    if replace:  # what an agent left there (a folder, a file, a link) goes, never followed
        remove_paths(workspace)
    try:
        workspace.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(fixture, workspace)
    except OSError as exc:
        raise StorageError(f"cannot copy the workspace fixture {fixture} to {workspace}: {exc}") from None


def _workspace(request: ATPRequest) -> Path | None:
    context = request.context
    if context is not None and context.workspace_path:
        return Path(context.workspace_path)
    return None
