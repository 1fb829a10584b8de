"""Runs made through an executor (:mod:`atp.core.executor`): sent to a worker, shipped back.

A run goes to the executor with its task id; what comes back is the result, events and log a
worker made with the runner's own code (:mod:`atp.core.worker`). Its events and log are written
here (named here: a worker names no path), and the retries of faults of the infrastructure (a
worker lost, an agent the worker could not reach) are decided and recorded here, so that the
rate limit and the retry count hold for every worker. A run that takes longer than its time
limits and a minute to spare counts as lost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import anyio
import msgspec

from atp.core import files
from atp.core.attempt import MAX_ERROR_CHARS, Gate, RunMaker, after_retries
from atp.core.errors import ExecutorLost, StorageError, single_exception
from atp.core.executor import Executor, Shipped
from atp.core.hooks import Notifier
from atp.core.protocol import ATPRequest
from atp.core.results import Retry, RunResult, RunStore, events_path, log_path, utcnow
from atp.core.retry import Fault, infrastructure_fault
from atp.core.suite import Test
from atp.core.text import printable, shorten

__all__ = ["REMOTE_SPARE_SECONDS", "RemoteRuns"]

REMOTE_SPARE_SECONDS = 60.0
"""How much longer than its time limits a run on a worker may take before the worker counts
as lost."""

_shipped_decoder = msgspec.json.Decoder(RunResult)


class _Sent:
    """What one attempt at a remote run brought back."""

    __slots__ = ("failure", "fault", "shipped", "started", "started_at", "task_id")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.started_at = utcnow()
        self.started = time.perf_counter()
        self.shipped: Shipped | None = None
        self.fault: Fault | None = None
        self.failure: str | None = None


class RemoteRuns:
    """The runs of one suite made through an executor."""

    def __init__(
        self,
        executor: Executor,
        maker: RunMaker,
        store: RunStore,
        request_of: Callable[[Test, int], ATPRequest],
    ) -> None:
        self.executor = executor
        self.maker = maker
        self.store = store
        self.request_of = request_of

    @property
    def _gate(self) -> Gate:
        return self.maker.gate

    @property
    def _notify(self) -> Notifier:
        return self.maker.notify

    async def make(self, test: Test, run_number: int) -> RunResult:
        """Make one run through the executor: its result, events and log written here (the
        result is not stored). Raises :class:`~atp.core.errors.ExecutorLost` when no run can
        be made any more, :class:`~atp.core.attempt.NotStarted` when its turn came too late."""
        await self._gate.first_turn()
        request = self.request_of(test, run_number)
        if run_number == 1:
            self._notify("atp_test_started", test=test)
        self._notify(
            "atp_run_started", test=test, run_number=run_number, request=self.maker.for_hooks(request)
        )
        retries: list[Retry] = []
        limit = self.limit(test)
        attempt = 1
        while True:
            if attempt > 1:
                await self._gate.turn()
            sent = await self._send(
                test, run_number, request.task_id if attempt == 1 else str(uuid.uuid4()), limit
            )
            where = sent.shipped.where if sent.shipped is not None and sent.shipped.where else None
            wait = self.maker.next_attempt(attempt, sent.fault, retries, where)
            if wait is None:
                break
            await anyio.sleep(wait)
            attempt += 1
        result = self._result(test, run_number, sent, retries)
        result.retries = retries + result.retries
        return result

    async def _send(self, test: Test, run_number: int, task_id: str, limit: float) -> _Sent:
        sent = _Sent(task_id)
        with anyio.move_on_after(limit) as waited:
            try:
                sent.shipped = await self.executor.execute(test.id, run_number, task_id)
            except ExecutorLost:
                raise
            except Exception as raised:
                exc = single_exception(raised)
                sent.fault = infrastructure_fault(exc)
                if sent.fault is None:
                    sent.failure = (
                        f"executor {self.executor.name!r} could not make the run: {type(exc).__name__}: {exc}"
                    )
        if waited.cancelled_caught:
            sent.fault = Fault(f"the executor did not send the run back within {limit:g} s")
        if sent.shipped is not None and sent.shipped.fault is not None:
            sent.fault = Fault(sent.shipped.fault, sent.shipped.retry_after)
        return sent

    def _result(self, test: Test, run_number: int, sent: _Sent, retries: list[Retry]) -> RunResult:
        """The run's result from its last attempt: what the worker sent, or an error saying
        why nothing usable came back."""
        result, readable = self.shipped_result(test, run_number, sent.shipped)
        if result is not None and sent.fault is not None and retries and result.error:
            result.error = shorten(after_retries(result.error, retries), MAX_ERROR_CHARS, self.maker.masker)
        if result is None:
            error = sent.failure or (
                sent.fault.reason if sent.fault is not None else "the executor sent nothing back"
            )
            if retries:
                error = after_retries(error, retries)
            masker = self.maker.masker
            if masker is not None:
                error = masker.text(error)
            return RunResult(
                test_id=test.id,
                run_number=run_number,
                task_id=sent.task_id,
                outcome="error",
                status="failed",
                score=0.0,
                duration_seconds=round(time.perf_counter() - sent.started, 6),
                started_at=sent.started_at,
                error=shorten(error, MAX_ERROR_CHARS),
            )
        if readable:
            self.store_shipped(test, result, sent.shipped)
        return result

    def limit(self, test: Test) -> float:
        """How long a run may take on a worker before ATP counts the worker as lost: the
        test's time limit, its evaluators' and a minute to spare."""
        timeout = float(test.timeout_seconds)
        agent = self.maker.agent
        if agent.timeout is not None:
            timeout = min(timeout, float(agent.timeout))
        evaluation = self.maker.evaluation
        return timeout + sum(evaluation.timeout(a.type) for a in test.assertions) + REMOTE_SPARE_SECONDS

    def shipped_result(
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

    def store_shipped(self, test: Test, result: RunResult, shipped: Shipped | None) -> None:
        """Write a shipped run's events and log where this run directory keeps them, and replay
        the events to the plugins that follow them."""
        store = self.store
        assert shipped is not None
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
        if self._notify.wants("atp_event") and result.events_file is not None:
            for event in store.events(result):
                self._notify("atp_event", test=test, run_number=result.run_number, event=event)
