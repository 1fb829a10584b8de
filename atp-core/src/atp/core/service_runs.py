"""The services a test asks for (:mod:`atp.core.service`, the mock tool server), around its runs.

A service is made and started once, lazily, before the first run that needs it, whatever the
runs in flight; each run enters the test's services in order (the request each yields goes to
the next, the last one's to the agent) and leaves them, last first, when it ends. They are
closed at the end, where the adapter is. A service that cannot be made, start or get ready
makes the runs that need it errors naming it; one that fails on the way out is a warning on the
run and a plugin failure. A test without services costs nothing of this.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import anyio

from atp.core.errors import AtpError, single_exception
from atp.core.hooks import FailureSink
from atp.core.plugins import Plugins, format_exception
from atp.core.protocol import ATPRequest
from atp.core.secrets import Masker
from atp.core.service import Recorder, Records, Service
from atp.core.suite import Test
from atp.core.text import describe, mask, shorten

__all__ = ["SERVICE_LEAVE_SECONDS", "Entered", "ServiceFailed", "Services"]

SERVICE_LEAVE_SECONDS = 30.0
"""How long a service may take to leave a run (its ``run`` context's exit), or an evaluator to
close, before it is abandoned with a warning."""
MAX_ERROR_CHARS = 4000
MAX_TRACEBACK_CHARS = 8000


class ServiceFailed(Exception):
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
        self.failure: ServiceFailed | None = None


class Entered:
    """The services entered for one run, and the one being entered."""

    __slots__ = ("announced", "contexts", "pending")

    def __init__(self) -> None:
        self.contexts: list[tuple[str, AbstractAsyncContextManager[ATPRequest]]] = []
        self.pending: str | None = None
        self.announced = False
        """Whether ``atp_run_started`` was called (a run whose services failed is announced
        as it ends, so that every run is announced once)."""


class Services:
    """The services made for one suite's runs, by key."""

    def __init__(self, plugins: Plugins, failed: FailureSink, masker: Masker | None = None) -> None:
        self._plugins = plugins
        self._failed = failed
        self._masker = masker
        """The suite's secrets: a service's failure quoted in a result is masked, then cut."""
        self._services: dict[str, _Started] = {}
        self._lock: anyio.Lock | None = None

    def begin(self) -> None:
        """Get ready on the current event loop."""
        self._lock = anyio.Lock()

    async def get(self, key: str) -> Service:
        """The service of ``key``, made and started on first use (one start, whatever the runs
        in flight); raises :class:`ServiceFailed` when it cannot be made or did not start."""
        started = self._services.get(key)
        if started is None or not started.ready:
            assert self._lock is not None, "begin() makes the lock"
            async with self._lock:
                started = await self._start(key)
        if started.failure is not None:
            raise started.failure
        assert started.service is not None
        return started.service

    async def _start(self, key: str) -> _Started:
        started = self._services.get(key)
        if started is None:
            started = self._services[key] = _Started()
            try:
                started.service = self._plugins.service(key)()
            except Exception as exc:
                started.failure = self.failure(key, "could not be created", exc)
        if started.failure is None and not started.ready:
            assert started.service is not None
            try:
                await started.service.start()
            except Exception as exc:
                started.failure = self.failure(key, "failed to start", single_exception(exc))
            else:
                started.ready = True
        return started

    def failure(self, key: str, what: str, exc: BaseException) -> ServiceFailed:
        """The failure of service ``key`` (``what`` it could not do), naming its plugin."""
        message = f"service {key!r} of {self._plugins.owner('service', key)} {what}: "
        masker = self._masker
        if isinstance(exc, AtpError):
            return ServiceFailed(message + mask(str(exc), masker))
        return ServiceFailed(
            f"{message}{type(exc).__name__}: {shorten(str(exc), MAX_ERROR_CHARS, masker)}",
            shorten(format_exception(exc), MAX_TRACEBACK_CHARS, masker),
        )

    async def enter(self, test: Test, request: ATPRequest, trace: Records, entered: Entered) -> ATPRequest:
        """Enter the test's services for one run, in order; the request each yields goes to the
        next, the last one's to the agent."""
        for use in test.services:
            entered.pending = use.key
            service = await self.get(use.key)
            try:
                context = service.run(use.config, request, Recorder(trace, use.key))
                yielded = await context.__aenter__()
            except Exception as exc:
                raise self.failure(
                    use.key, "could not get ready for the run", single_exception(exc)
                ) from None
            entered.contexts.append((use.key, context))
            if not isinstance(yielded, ATPRequest) or yielded.task_id != request.task_id:
                what = (
                    f"changed the request's task_id to {yielded.task_id!r}"
                    if isinstance(yielded, ATPRequest)
                    else f"yielded {describe(yielded)}, not an ATPRequest"
                )
                raise ServiceFailed(
                    f"service {use.key!r} of {self._plugins.owner('service', use.key)} {what}"
                )
            request = yielded
        entered.pending = None
        return request

    async def leave(self, entered: Entered, trace: Records) -> None:
        """Leave the services entered for a run, last first, shielded from cancellation; one
        that raises is a warning on the run and a plugin failure, and the others are left."""
        for key, context in reversed(entered.contexts):
            with anyio.move_on_after(SERVICE_LEAVE_SECONDS, shield=True) as scope:
                try:
                    await context.__aexit__(None, None, None)
                except Exception as exc:
                    inner = single_exception(exc)
                    trace.warn(f"service {key!r} failed when the run ended: {type(inner).__name__}: {inner}")
                    self._failed(self._owner(key), f"service {key!r}", inner)
            if scope.cancelled_caught:
                trace.warn(
                    f"service {key!r} did not finish leaving the run within {SERVICE_LEAVE_SECONDS:g} s"
                )

    async def aclose(self) -> None:
        """Close every service made (even one whose start failed); a failure there is warned
        about and recorded, the results stand."""
        for key, started in self._services.items():
            if started.service is None:
                continue
            try:
                await started.service.aclose()
            except Exception as exc:
                self._failed(self._owner(key), f"service {key!r} aclose", single_exception(exc))

    def __bool__(self) -> bool:
        return bool(self._services)

    def _owner(self, key: str) -> str:
        return self._plugins.owner_name("service", key) or key
