"""The service interface: what ATP serves an agent while it runs (a mock tool server, a mock LLM,
a database fixture).

A service is registered under the ``key`` a test, or a suite's ``defaults``, uses to ask for it;
the value under that key is the service's configuration, checked against its ``Config`` (and
:meth:`Service.check`) when the suite loads, each error with file, path and line::

    defaults:
      tools: [{name: web_search, output: {results: []}}]   # every test gets the tool server
    tests:
      - id: search
        tools: [{name: lookup, output: {id: 1}}]           # this test's value replaces the default's
      - id: offline
        tools: null                                        # this test does without it

ATP makes at most one instance of each service per ``atp test``. It calls :meth:`Service.start`
once, lazily, before the first run of a test that uses the service (concurrent runs wait for that
one start); enters :meth:`Service.run` around each run of such a test, whose context manager
yields the request the agent gets (the service adds what the agent needs to reach it, such as
``context.tools_endpoint``, and keeps the rest); and calls :meth:`Service.aclose` at the end of the
suite, also after Ctrl-C, on every instance it made (even one whose ``start`` failed).

Failures: a service that raises in ``start`` or while entering ``run`` makes that run an
``error`` naming the service, and the other runs go on; a failed ``start`` is not tried again
(every later run that needs the service gets the same error). Raising while leaving ``run`` is
a warning on the run and a plugin failure in the results; the run's result stands.

``run`` is entered and left on the runner's event loop, inside the run's time limit, and is
left normally (without the exception) however the agent's run ended: success, failure, time
limit or Ctrl-C (leaving is shielded from cancellation). It must not keep a task group or
cancel scope open across its ``yield``: work that outlives one step (serving connections) belongs
to what ``start`` set up.

What a service observes itself (a tool call it answered) goes into the run's trace through the
:class:`Recorder` it is given: such events are written to the events file and counted in the
summary like the agent's own, so evaluators see them; they are kept apart from the agent's
sequence-order checks (see :meth:`atp.core.trace.RunTrace.record`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import msgspec

from atp.core.protocol import ATPRequest, Context

if TYPE_CHECKING:
    from atp.core.secrets import Masker


class ServiceUse(msgspec.Struct, frozen=True):
    """A service a test uses: its key and its configuration, validated against its ``Config``."""

    key: str
    config: Any


class ServiceConfigError(ValueError):
    """Raised by :meth:`Service.check` for a rule its ``Config`` type cannot express; ``at`` is
    the path below the service's key (``(2, "name")``: the third entry's ``name``), so the
    suite's error names the file, the path and the line."""

    def __init__(self, message: str, at: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.at = tuple(at)


class Records(Protocol):
    """Where a :class:`Recorder` writes: a run's trace (:class:`~atp.core.trace.RunTrace`), or
    the sink of ``atp validate``'s probe (which runs the probed test's services too)."""

    task_id: str
    masker: Masker | None

    def record(self, payload: msgspec.Struct, *, by: str) -> object: ...

    def serve_tools(self, names: Iterable[str]) -> None: ...

    def warn(self, message: str) -> None: ...


class Recorder:
    """What a service records about one run, into that run's trace.

    Events recorded here are ATP's own observations (``recorded_by`` the service's key in the
    events file): they are counted like the agent's events but never checked against the
    agent's sequence numbers, and an agent cannot make its own events look like them.
    """

    def __init__(self, trace: Records, key: str) -> None:
        self._trace = trace
        self.key = key
        """The key of the service recording."""

    @property
    def task_id(self) -> str:
        """The run's task_id (events and tool calls of the run carry it)."""
        return self._trace.task_id

    @property
    def masker(self) -> Masker | None:
        """The run's secrets: what the service quotes of the agent's requests in a message is
        masked with it before it is cut (:func:`atp.core.text.shown`)."""
        return self._trace.masker

    def record(self, payload: msgspec.Struct) -> None:
        """Record one event the service observed, built from its typed payload
        (:class:`~atp.core.protocol.ToolCallPayload` for a tool call). Masked like every event;
        ignored once the run has ended, and beyond the run's event limits (with a warning)."""
        self._trace.record(payload, by=self.key)

    def serve_tools(self, names: Iterable[str]) -> None:
        """Declare that this service answers the tools ``names`` in this run: its recordings of
        their calls are authoritative, and ``tool_call`` events the agent reports itself for
        them are left out of the trace (with one warning), so no call is counted twice."""
        self._trace.serve_tools(names)

    def warn(self, message: str) -> None:
        """A warning on the run (masked), for something the agent did wrong with the service."""
        self._trace.warn(message)


class Service(ABC):
    """A service ATP runs next to the agent for the tests that ask for it (see the module)."""

    key: ClassVar[str]
    """The key tests and the suite's ``defaults`` use to ask for this service (``tools``). It
    must not be one of the test's own keys (``id``, ``task``, ...)."""
    summary: ClassVar[str] = ""
    """One line for ``atp plugins``."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same key this class replaces on purpose.
    Without it, two plugins registering one key is an error naming both."""
    Config: ClassVar[Any] = dict[str, Any]
    """The msgspec type of what the key holds (a Struct, ``list[Tool]``, ...), checked when the
    suite loads; unknown keys in a Struct should be errors (``forbid_unknown_fields=True``)."""

    @classmethod  # noqa: B027 - optional hook
    def check(cls, config: Any) -> None:
        """Rules ``Config`` cannot express (two entries with one name): raise
        :class:`ServiceConfigError` with where below the key. Called when the suite loads."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Prepare once, before the first run that uses the service (bind a server)."""

    @abstractmethod
    def run(
        self, config: Any, request: ATPRequest, recorder: Recorder
    ) -> AbstractAsyncContextManager[ATPRequest]:
        """The context of one run: yields the request to send the agent (``request`` with what
        the service adds, see :func:`with_context`), and records what it observes through
        ``recorder``. ``config`` is the test's value, validated."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what :meth:`start` acquired (at the end of the suite, also after Ctrl-C)."""


def with_context(request: ATPRequest, **fields: Any) -> ATPRequest:
    """``request`` with the ``context`` fields given set (``tools_endpoint=url``), its other
    context fields (the workspace, the environment) kept."""
    context = request.context if request.context is not None else Context()
    return msgspec.structs.replace(request, context=msgspec.structs.replace(context, **fields))


def describe_key_problem(key: str, reserved: set[str]) -> str | None:
    """Why ``key`` cannot be a service's key, or ``None`` when it can."""
    if not key or not key.replace("_", "a").replace("-", "a").isalnum() or not key.isascii():
        return f"key {key!r} is not a name (letters, digits, '_' and '-')"
    if key in reserved:
        return f"key {key!r} is one of a test's own keys"
    return None
