"""The ``dask`` executor: a suite's runs made on the workers of a Dask cluster (docs/cluster.md).

``atp test --executor=dask --address=tcp://HOST:8786`` connects an asynchronous
``distributed.Client`` on ATP's own event loop. At the start, every worker is asked (out of
band, ``Client.run``) whether it has ATP's executor in the same version and opens the job: it
loads the config, the suite and the agent from the same paths (an
:class:`atp.core.worker.WorkerSession`). The job is also scattered to every worker once, so that
a worker that joins later opens it on its first run. Each run is then one Dask task of a few
arguments (the job's key, the test id, the run number and the task id); the worker makes it in
one of its threads and sends back a :class:`~atp.core.executor.Shipped` in msgpack. At the end,
every worker closes the job; a worker plugin closes the jobs a worker still holds when the
worker itself stops (one whose ``atp test`` was killed).

A worker lost while making a run (Dask's ``KilledWorker``, a closed connection, a task
cancelled by the cluster) is a retryable :class:`~atp.core.errors.AdapterError`: ATP makes the
run again, on another worker, as ``retries`` allows, and records the retry. For that to be
ATP's decision alone, the scheduler should not re-run a dead worker's tasks itself
(``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0``); ATP warns when it does.

This module imports ``distributed`` only when the executor starts: the plugin registers the
class without it, and says which ``pip install`` gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import anyio
import msgspec

from atp.core.errors import AdapterError, AtpError, ConfigError, ExecutorLost
from atp.core.executor import Executor, Job, Shipped
from atp.core.text import printable, shorten

if TYPE_CHECKING:
    from atp.core.worker import WorkerSession

logger = logging.getLogger("atp.executors")

CLOSE_SECONDS = 30.0
"""How long closing may take: the workers stopping their runs and agents, the client closing."""
STOP_SECONDS = 5.0
"""How long telling the cluster to stop runs that ATP cancelled may take."""
MESSAGE_CHARS = 500
"""How much of a worker's error a message quotes."""
INSTALL = "atp-executors[dask]"


class DaskSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``executors.dask`` in ``atp.config.yaml`` (``--address`` sets ``address``)."""

    address: str | None = None
    """The scheduler's address, like ``tcp://10.0.0.5:8786``."""
    connect_timeout: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 10.0
    """Seconds to reach the scheduler, and to wait for a first worker."""


class DaskExecutor(Executor):
    """Makes the runs on a Dask cluster's workers; everything else stays in ``atp test``."""

    name = "dask"
    summary = "runs on the workers of a Dask cluster (--address=tcp://scheduler:8786)"
    Settings: ClassVar[type[msgspec.Struct]] = DaskSettings

    def __init__(self, settings: Any) -> None:
        if not isinstance(settings, DaskSettings):
            settings = msgspec.convert(settings or {}, DaskSettings)
        super().__init__(settings)
        if not settings.address:
            raise ConfigError(
                "the dask executor needs the scheduler's address: --address=tcp://HOST:8786, "
                "or executors: {dask: {address: ...}} in atp.config.yaml"
            )
        self.address: str = settings.address
        self.connect_timeout: float = settings.connect_timeout
        self._client: Any = None
        self._job_data: Any = None
        """The job, scattered to every worker (a Dask future)."""
        self._job_lock = anyio.Lock()
        self._futures: set[Any] = set()
        self._stopping: list[Any] = []
        self._stopped_ids: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._opened = False
        """Whether the workers were asked to open the job (and so are asked to close it)."""
        self._relay: _Relay | None = None
        self._threads: int | None = None

    @property
    def capacity(self) -> int | None:
        """The threads of the workers there were at the start: a run handed to the cluster
        starts at once (its time limit does not run out in a queue)."""
        return self._threads

    # --- starting ------------------------------------------------------------------------

    async def start(self, job: Job) -> None:
        await super().start(job)
        distributed = _distributed()
        address, timeout = self.address, self.connect_timeout
        self._loop = asyncio.get_running_loop()
        self._relay = _Relay.attach()
        client = distributed.Client(address, asynchronous=True, timeout=timeout, set_as_default=False)
        try:
            with anyio.fail_after(timeout + 5):
                await client
        except Exception as raised:
            with anyio.move_on_after(STOP_SECONDS, shield=True):
                with contextlib.suppress(Exception):
                    await client.close()
            if isinstance(raised, ValueError):  # Dask cannot read the address
                raise ConfigError(
                    f"the dask executor's address {address!r} is not a scheduler address like "
                    f"tcp://10.0.0.5:8786: {_reason(raised)}"
                ) from None
            reason = _reason(raised)
            if isinstance(raised, TimeoutError) or "timed out" in reason.lower():
                reason = "nothing answered (is the scheduler running there?)"
            raise AdapterError(
                f"cannot connect to the Dask scheduler at {address} within {timeout:g} s: {reason}",
                retryable=False,
            ) from None
        self._client = client
        try:
            await client.wait_for_workers(1, timeout=timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise AdapterError(
                f"the Dask scheduler at {address} has no workers (waited {timeout:g} s); start some "
                f"with: dask worker {address}",
                retryable=False,
            ) from None
        await self._check_workers(client)
        await self._check_scheduler(client)
        threads = client.nthreads()
        if inspect.isawaitable(threads):  # the asynchronous client's answer
            threads = await threads
        self._threads = max(1, sum(int(n) for n in threads.values())) if threads else None
        await client.register_plugin(_closing_plugin())
        data = msgspec.msgpack.encode(job)
        self._opened = True
        opened = await client.run(_open_session, job.key, data, on_error="return")
        failed = {worker: answer for worker, answer in opened.items() if isinstance(answer, BaseException)}
        if failed:
            raise ConfigError(_worker_problems(failed, "cannot make this suite's runs", len(opened)))
        self._job_data = await client.scatter(data, broadcast=True, hash=False)

    async def _check_workers(self, client: Any) -> None:
        """Every worker has ATP's executor, in the versions this process has."""
        here = _versions()
        answers = await client.run(_versions, on_error="return")
        missing = {worker: answer for worker, answer in answers.items() if isinstance(answer, BaseException)}
        if missing:
            raise AtpError(
                _worker_problems(missing, "cannot load ATP's executor", len(answers))
                + "; install ATP on every worker as here, with the plugins the suite uses (docs/cluster.md, "
                + '"Setting up a cluster")'
            )
        other = {worker: found for worker, found in answers.items() if found != here}
        if other:
            worker, found = sorted(other.items())[0]
            theirs = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
            ours = ", ".join(f"{k} {v}" for k, v in sorted(here.items()))
            more = f" (and {len(other) - 1} more)" if len(other) > 1 else ""
            raise AtpError(
                f"worker {worker}{more} has {theirs}, this ATP {ours}: install the same versions on the workers"
            )

    async def _check_scheduler(self, client: Any) -> None:
        """Warn when the scheduler re-runs a dead worker's tasks itself (ATP would not see it)."""
        try:
            allowed = await client.run_on_scheduler(_allowed_failures_reader())
        except Exception as exc:  # an old or locked-down scheduler: not worth stopping for
            logger.debug("could not read the scheduler's allowed-failures: %s", _reason(exc))
            return
        if isinstance(allowed, int) and allowed > 0:
            logger.warning(
                "the Dask scheduler at %s runs a task again on another worker when its worker dies "
                "(allowed-failures is %d): such runs are made again without ATP recording a retry. "
                "Start the scheduler with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 so that ATP "
                "decides (its retries setting) and records each one",
                self.address,
                allowed,
            )

    # --- runs ----------------------------------------------------------------------------

    async def execute(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        client, job = self._client, self.job
        if client is None or job is None:
            raise AdapterError("the dask executor was not started", retryable=False)
        distributed = _distributed()
        what = f"run {run_number} of test {test_id!r}"
        if client.status in ("closing", "closed"):
            raise ExecutorLost(
                f"the connection to the Dask scheduler at {self.address} is closed "
                f"(it did not come back within {self.connect_timeout:g} s)"
            )
        future: Any = None
        try:
            data = await self._job_future()
            future = client.submit(
                _run_on_worker,
                data,
                job.key,
                test_id,
                run_number,
                task_id,
                key=f"atp-run-{uuid.uuid4().hex}",
                pure=False,
                retries=0,
            )
            self._futures.add(future)
            answer = await future
        except anyio.get_cancelled_exc_class():
            if future is not None:
                self._stop(future, task_id)
            raise
        except distributed.KilledWorker as exc:
            worker = getattr(getattr(exc, "last_worker", None), "address", None) or "?"
            raise AdapterError(f"worker {worker} died while making {what} (Dask: KilledWorker)") from None
        except distributed.client.FutureCancelledError as exc:
            if self._closing:
                raise AdapterError(
                    f"{what} was stopped: ATP is closing the executor", retryable=False
                ) from None
            why = printable(str(getattr(exc, "reason", "") or "unknown"))
            raise AdapterError(f"the Dask cluster lost {what} (cancelled: {why})") from None
        except distributed.comm.CommClosedError as exc:  # the scheduler or a worker went away
            raise AdapterError(
                f"the connection to the Dask cluster was lost while making {what}: {_reason(exc)}"
            ) from None
        except Exception as exc:
            if client.status == "running":
                if isinstance(exc, TimeoutError) and "No valid workers" in str(exc):
                    raise AdapterError(f"the Dask cluster has no workers to make {what}") from None
                raise  # the worker's own error (a test its suite does not have, say): as it is
            if client.status in ("closing", "closed"):
                raise ExecutorLost(
                    f"the connection to the Dask scheduler at {self.address} was lost while making {what}: {_reason(exc)}"
                ) from None
            raise AdapterError(
                f"the connection to the Dask scheduler at {self.address} was lost while making {what}: {_reason(exc)}"
            ) from None
        finally:
            if future is not None:
                self._futures.discard(future)
        if not isinstance(answer, bytes):
            raise AdapterError(
                f"a worker sent back {type(answer).__name__} for {what}, not a run", retryable=False
            )
        return msgspec.msgpack.decode(answer, type=Shipped)

    async def _job_future(self) -> Any:
        """The scattered job; scattered again when the cluster lost it (a scheduler restarted)."""
        data = self._job_data
        if data is not None and data.status == "finished":
            return data
        async with self._job_lock:
            data = self._job_data
            if data is None or data.status not in ("finished", "pending"):
                assert self.job is not None
                data = self._job_data = await self._client.scatter(
                    msgspec.msgpack.encode(self.job), broadcast=True, hash=False
                )
            return data

    def _stop(self, future: Any, task_id: str) -> None:
        """A run ATP cancelled (its time limit, Ctrl-C): cancel its task and stop it on the
        workers. The runs cancelled at once go in one message to the cluster."""
        self._stopping.append(future)
        self._stopped_ids.add(task_id)
        if len(self._stopping) == 1:
            self._spawn(self._stop_batch())

    async def _stop_batch(self) -> None:
        await asyncio.sleep(0)  # the other runs cancelled with this one join the batch
        futures, self._stopping = self._stopping, []
        task_ids, self._stopped_ids = sorted(self._stopped_ids), set()
        client, job = self._client, self.job
        if client is None or job is None:
            return
        try:
            with anyio.fail_after(STOP_SECONDS):
                await client.cancel(futures, reason="stopped by ATP")
                await client.run(_stop_runs, job.key, task_ids, on_error="ignore")
        except Exception as exc:
            logger.debug("could not stop %d runs on the Dask cluster: %s", len(task_ids), _reason(exc))

    def _spawn(self, coroutine: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            coroutine.close()
            return

        def spawn() -> None:
            task = loop.create_task(coroutine)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            spawn()
        else:
            loop.call_soon_threadsafe(spawn)

    # --- the end -------------------------------------------------------------------------

    def abort(self) -> None:
        """Stop every agent of this job on every worker at once (best effort, not waited for)."""
        client, job = self._client, self.job
        if client is None or job is None:
            return

        async def abort() -> None:
            with contextlib.suppress(Exception):
                with anyio.fail_after(STOP_SECONDS):
                    await client.run(_abort_session, job.key, on_error="ignore")

        self._spawn(abort())

    async def aclose(self) -> None:
        """Cancel the tasks still out, let every worker close the job (its runs stopped, its
        agent stopped, its folder removed) and disconnect; within :data:`CLOSE_SECONDS`,
        shielded from cancellation. What fails here is logged: the results stand."""
        try:
            await self._close()
        finally:
            if self._relay is not None:
                self._relay.detach()
                self._relay = None

    async def _close(self) -> None:
        client, job = self._client, self.job
        if client is None:
            return
        self._closing = True
        if client.status in ("closing", "closed"):  # the scheduler was lost (distributed said so)
            self._client = None
            with anyio.move_on_after(STOP_SECONDS, shield=True), contextlib.suppress(Exception):
                await client.close()  # (let it finish closing on this event loop)
            return
        with anyio.move_on_after(CLOSE_SECONDS, shield=True) as scope:
            try:
                if self._futures:
                    await client.cancel(list(self._futures), reason="ATP closed the executor")
                if self._background:
                    await asyncio.gather(*self._background, return_exceptions=True)
                if job is not None and self._opened:
                    closed = await client.run(_close_session, job.key, on_error="return")
                    failed = {w: a for w, a in closed.items() if isinstance(a, BaseException)}
                    if failed:
                        logger.warning("%s", _worker_problems(failed, "could not close the job", len(closed)))
                if self._job_data is not None:
                    self._job_data.release()
                    self._job_data = None
            except Exception as exc:
                logger.warning(
                    "the Dask cluster at %s did not close the job cleanly: %s", self.address, _reason(exc)
                )
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
                self._client = None
        if scope.cancelled_caught:
            logger.warning(
                "the Dask cluster at %s did not close the job within %g s; its workers may still be "
                "stopping its agents",
                self.address,
                CLOSE_SECONDS,
            )


# --- on the workers ------------------------------------------------------------------------
#
# Module-level functions, so that they are sent to the workers by name: a worker without ATP's
# executor installed cannot load them, which is what start() checks.

_SESSIONS: dict[str, WorkerSession] = {}
"""The jobs open in this worker process, by key."""
_CLOSED: set[str] = set()
"""The keys of the jobs closed here: a late task of one does not open it again."""
_LOCK = threading.Lock()


def _session(key: str, data: bytes, where: str | None) -> WorkerSession:
    session = _SESSIONS.get(key)
    if session is not None:
        return session
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            if key in _CLOSED:
                raise AdapterError(f"the ATP job {key} was closed on worker {where}", retryable=False)
            from atp.core.worker import WorkerSession

            session = WorkerSession(msgspec.msgpack.decode(data, type=Job))
            if where:
                session.where = where
            _SESSIONS[key] = session
    return session


def _worker_address() -> str | None:
    try:
        from distributed import get_worker

        address: str = get_worker().address
        return address
    except (ImportError, ValueError):
        return None


def _run_on_worker(data: bytes, key: str, test_id: str, run_number: int, task_id: str) -> bytes:
    """One run, made in a worker's thread: the job's session (opened on first use) makes it."""
    where = _worker_address()
    shipped = _session(key, data, where).run(test_id, run_number, task_id)
    if where:
        shipped.where = where
    return msgspec.msgpack.encode(shipped)


async def _open_session(key: str, data: bytes, dask_worker: Any = None) -> str | None:
    where = getattr(dask_worker, "address", None)
    await asyncio.to_thread(_session, key, data, where)
    return where


async def _stop_runs(key: str, task_ids: list[str]) -> None:
    session = _SESSIONS.get(key)
    if session is not None:
        await asyncio.to_thread(session.cancel, set(task_ids))


def _abort_session(key: str) -> None:
    session = _SESSIONS.get(key)
    if session is not None:
        session.abort()


async def _close_session(key: str) -> None:
    with _LOCK:
        _CLOSED.add(key)
        session = _SESSIONS.pop(key, None)
    if session is not None:
        await asyncio.to_thread(session.close)


def _close_all_sessions() -> None:
    """The worker is closing: stop every job's agents at once and release the jobs (their
    threads would keep the worker process from exiting)."""
    with _LOCK:
        sessions = list(_SESSIONS.items())
        _SESSIONS.clear()
        _CLOSED.update(key for key, _ in sessions)
    for _, session in sessions:
        session.abort()
        session.close()


def _closing_plugin() -> Any:
    """A Dask worker plugin that closes the jobs still open when its worker closes (a job whose
    ``atp test`` was killed, or whose scheduler was lost). Registered once per cluster (it is
    idempotent: another ``atp test`` does not replace it, which would close its jobs)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class ClosesAtpJobs(WorkerPlugin):
        name = "atp-executors"
        idempotent = True

        async def teardown(self, worker: Any) -> None:
            await asyncio.to_thread(_close_all_sessions)

    return ClosesAtpJobs()


def _versions() -> dict[str, str]:
    """The versions of ATP's kernel and executors in this process (on a worker: loading this
    function at all shows the executor is installed)."""
    from importlib import metadata

    import atp.core.worker  # noqa: F401 - what the runs need

    found = {}
    for dist in ("atp-kernel", "atp-executors"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def _allowed_failures_reader() -> Any:
    """A function for the scheduler that reads its ``allowed-failures``. Defined inside a
    function, it is sent by value: the scheduler needs no ATP."""

    def allowed_failures(dask_scheduler: Any = None) -> Any:
        return getattr(dask_scheduler, "allowed_failures", None)

    return allowed_failures


# --- helpers -------------------------------------------------------------------------------


class _Relay(logging.Handler):
    """While the executor works, what ``distributed`` warns about (a lost scheduler, a failed
    reconnection) is said as ATP's own warnings, one line each, without the library's
    tracebacks; its informational messages are left out."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.source = logging.getLogger("distributed")
        self.propagate = self.source.propagate

    @classmethod
    def attach(cls) -> _Relay | None:
        """Relay when ``distributed`` logs through the application's handlers (ATP's); not when
        it has a handler of its own (it was imported before logging was set up)."""
        relay = cls()
        if relay.source.handlers:
            return None
        relay.source.addHandler(relay)
        relay.source.propagate = False
        return relay

    def detach(self) -> None:
        self.source.removeHandler(self)
        self.source.propagate = self.propagate

    def emit(self, record: logging.LogRecord) -> None:
        try:
            lines = record.getMessage().strip().splitlines()
            message = lines[0] if lines else ""
            if record.exc_info and record.exc_info[1] is not None:
                message = f"{message} ({_reason(record.exc_info[1])})"
            logger.log(record.levelno, "dask: %s", message)
        except Exception:
            self.handleError(record)


def _distributed() -> Any:
    from atp.core.plugins import require

    require("distributed", install=INSTALL, feature="the dask executor")
    import distributed
    import distributed.client

    return distributed


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    if type(exc) is Exception and text:  # Dask's wrapping of an error it could not send as it was
        return shorten(printable(text), MESSAGE_CHARS)
    return shorten(printable(f"{type(exc).__name__}: {text}" if text else type(exc).__name__), MESSAGE_CHARS)


def _worker_problems(failed: dict[str, BaseException], what: str, total: int) -> str:
    worker, exc = sorted(failed.items())[0]
    more = f" ({len(failed)} of {total} workers)" if len(failed) > 1 else ""
    return f"worker {worker}{more} {what}: {_reason(exc)}"
