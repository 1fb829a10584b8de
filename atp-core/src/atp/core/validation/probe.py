"""One probe of ``atp validate``: a request made for it, sent through the adapter within the
time limit, and what came back (a response, the exception that ended it, or nothing in time).

The probe asks what :class:`ProbeTask` says: a suite's test, as ``atp test`` sends it (its task,
constraints and metadata; a fresh copy of its workspace fixture; its services, such as the mock
tool server, around it), so that an agent made for one task is probed with it; or, without a
suite, a generic greeting any agent can answer.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atp.core.validation.exceptions import single_exception
from atp.core.validation.sink import ProbeSink

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.plugins import Plugins
    from atp.core.protocol import ATPRequest, ATPResponse
    from atp.core.suite import Suite, Test
    from atp.core.validation.context import CheckContext

__all__ = ["MALFORMED_WHAT", "PROBE_DESCRIPTION", "Answer", "Around", "ProbeTask", "make_request", "send"]

PROBE_DESCRIPTION = "Reply with a short greeting. (A probe from atp validate: nothing else needs doing.)"
MALFORMED_WHAT = "a request with an empty task.description and constraints.max_steps 0"
"""The malformed request, as a failure of its check names it."""
_NOTHING = object()


class Answer:
    """What one probe got: a response, or the exception that ended it, or nothing in time."""

    def __init__(self, request: ATPRequest, sink: ProbeSink) -> None:
        self.request = request
        self.sink = sink
        self.response: ATPResponse | None = None
        self.error: BaseException | None = None
        self.timed_out = False
        self.seconds = 0.0


def make_request(
    description: str, timeout: float, *, max_steps: int | None = None, version: str | None = None
) -> ATPRequest:
    """A request with a fresh task_id. Structs are not validated when built: an empty
    ``description`` and ``max_steps=0`` go out as written, breaking the schema."""
    from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, Constraints, Task

    return ATPRequest(
        version=version or PROTOCOL_VERSION,
        task_id=str(uuid.uuid4()),
        task=Task(description=description),
        constraints=Constraints(max_steps=max_steps, timeout_seconds=max(1, math.ceil(timeout))),
        metadata={"test_id": "atp-validate", "run_number": 1, "total_runs": 1},
    )


class ProbeTask:
    """What the probe asks: ``test`` of the suite ``suite`` (its name), or the generic greeting."""

    RUN_ID = "atp-validate"
    """The ``run_id`` of a test's probe request (it is no run of the suite)."""

    def __init__(self, test: Test | None = None, suite: str = "") -> None:
        self.test = test
        self.suite = suite
        self.environment: Mapping[str, str] | None = None
        """What the request's ``context.environment`` carries: the agent's ``env`` and
        ``secrets``, as ``atp test`` sends them (set by the caller)."""
        self.plugins: Plugins | None = None
        """The plugins whose services (the mock tool server) the test asks for: set by the
        caller, they are started around the probe as ``atp test`` starts them around a run."""

    @classmethod
    def of_suite(cls, suite: Suite, test_id: str | None = None) -> ProbeTask:
        """The test ``test_id`` of ``suite`` (by default its first test not skipped, else its
        first); an id the suite does not have is a :class:`~atp.core.errors.ConfigError`."""
        from atp.core.errors import ConfigError
        from atp.core.text import shorten

        if test_id is None:
            test = next((t for t in suite.tests if t.skip is None), suite.tests[0])
            return cls(test, suite.name)
        found = next((t for t in suite.tests if t.id == test_id), None)
        if found is None:
            ids = shorten(", ".join(t.id for t in suite.tests), 300)
            raise ConfigError(f"the suite {suite.name!r} has no test {test_id!r} (its tests: {ids})")
        return cls(found, suite.name)

    @property
    def what(self) -> str:
        """What probes, for the output: the test and its suite, or the generic task."""
        if self.test is None:
            return "a generic task (give a suite to probe with one of its tests' tasks)"
        return f"the task of test {self.test.id!r} of suite {self.suite!r}"

    def request(self, timeout: float, workspace: Path | None = None) -> ATPRequest:
        """The probe's request: the test's as ``atp test`` builds it for its first run (its
        ``timeout_seconds`` no more than the probe waits), or the generic one."""
        import msgspec

        if self.test is None:
            request = make_request(PROBE_DESCRIPTION, timeout)
            if self.environment or workspace is not None:
                from atp.core.protocol import Context

                context = Context(
                    environment=dict(self.environment) if self.environment else None,
                    workspace_path=str(workspace) if workspace is not None else None,
                )
                request = msgspec.structs.replace(request, context=context)
            return request
        from atp.core.attempt import build_request
        from atp.core.plan import RunPlan

        where = (self.suite, self.RUN_ID)
        request = build_request(self.test, 1, RunPlan(1), where, workspace, None, self.environment)
        waits = max(1, math.ceil(timeout))
        limit = min(self.test.timeout_seconds, waits)
        return msgspec.structs.replace(
            request, constraints=msgspec.structs.replace(self.test.constraints, timeout_seconds=limit)
        )

    @contextlib.contextmanager
    def workspace(self, folder_per_run: bool = False) -> Iterator[Path | None]:
        """A fresh copy of the test's workspace fixture for the probe, or a fresh empty folder
        for an agent with a folder per run (``folder_per_run``), removed after it (``None``
        without either)."""
        fixture = self.test.workspace_fixture if self.test is not None else None
        if fixture is None and not folder_per_run:
            yield None
            return
        import tempfile

        from atp.core.attempt import copy_fixture
        from atp.core.tree import remove_tree

        folder = Path(tempfile.mkdtemp(prefix="atp-validate-"))
        try:  # (what the agent left is removed without recursion, links never followed)
            workspace = folder / "workspace"
            if fixture is not None:
                copy_fixture(fixture, workspace)
            else:
                workspace.mkdir()
            yield workspace
        finally:
            remove_tree(folder)

    @contextlib.asynccontextmanager
    async def served(self, request: ATPRequest, sink: ProbeSink) -> AsyncIterator[ATPRequest]:
        """The test's services (``tools:``) around the probe, entered as for a run of ``atp
        test``: the request they yield (with ``context.tools_endpoint``), what they observe
        recorded in ``sink``; closed after it. The request as it is without services (or
        without :attr:`plugins`)."""
        test = self.test
        if test is None or not test.services or self.plugins is None:
            yield request
            return
        from atp.core.service_runs import Entered, Services

        def failed(plugin: str, what: str, exc: BaseException, /) -> None:
            sink.warn(f"{what} of {plugin} failed: {type(exc).__name__}: {exc}")

        services = Services(self.plugins, failed, sink.masker)
        services.begin()
        entered = Entered()
        try:
            yield await services.enter(test, request, sink, entered)
        finally:
            await services.leave(entered, sink)
            await services.aclose()


Around = Callable[["ATPRequest", ProbeSink], AbstractAsyncContextManager["ATPRequest"]]
"""What surrounds a probe (:meth:`ProbeTask.served`): yields the request to send."""


async def send(
    adapter: Adapter, request: ATPRequest, context: CheckContext, around: Around | None = None
) -> Answer:
    """``request`` through the adapter (inside ``around``, when given), in a fresh sink, within
    the time limit."""
    import anyio

    from atp.core.protocol import ATPResponse

    answer = Answer(request, ProbeSink(request.task_id, context.masker))
    started = time.perf_counter()
    returned: Any = _NOTHING
    try:
        with anyio.move_on_after(context.timeout) as limit:
            if around is None:
                returned = await adapter.execute(request, answer.sink)
            else:
                async with around(request, answer.sink) as sent:
                    returned = await adapter.execute(sent, answer.sink)
    except Exception as raised:
        answer.error = single_exception(raised)
        context.debug(answer.error)
    if returned is _NOTHING:
        answer.timed_out = answer.error is None and limit.cancelled_caught
    elif isinstance(returned, ATPResponse):
        answer.response = returned
    else:
        answer.error = TypeError(f"adapter returned {type(returned).__name__}, not an ATPResponse")
    answer.seconds = time.perf_counter() - started
    return answer
