"""Helpers for testing ATP plugins: an in-process agent and a one-call evaluator runner.

    from atp.core.testing import run_evaluator, response

    checks = run_evaluator(MyEvaluator, {"min_words": 3}, response(structured={"out": "a b c"}))
    assert checks[0].passed

:func:`run_evaluator` applies the checks the runner applies to what ``evaluate`` returns (a
list of :class:`~atp.core.results.Check`, bool ``passed``, score within 0-1), so a plugin's
own tests fail where ``atp test`` would make the run an error.

The ``function`` adapter (``type: function``, ``function: module:attribute``) runs an agent
that is a Python callable ``(request, sink) -> response`` in the ATP process, on the event
loop: a fake agent for tests, registered with :class:`FunctionAdapterPlugin`. Users' Python
agents are served by atp-adapters' ``python`` adapter.
"""

import importlib
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Union

import anyio
import msgspec

from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, AtpError
from atp.core.evaluator import EvalContext, Evaluator, checked_result, is_async
from atp.core.hookspecs import hookimpl
from atp.core.protocol import (
    PROTOCOL_VERSION,
    Artifact,
    ATPRequest,
    ATPResponse,
    Constraints,
    Event,
    FileArtifact,
    Metrics,
    StructuredArtifact,
    Task,
)
from atp.core.results import Check
from atp.core.suite import Test
from atp.core.trace import EventSink, Trace

AgentFunction = Callable[[ATPRequest, EventSink], Union[ATPResponse, Awaitable[ATPResponse]]]
"""What ``function:`` names: ``(request, sink) -> response``, a plain or an async function."""


class FunctionSettings(msgspec.Struct, forbid_unknown_fields=True):
    """The settings of a ``type: function`` agent."""

    function: str
    """``module:attribute`` of a function ``(request, sink) -> response`` (sync or async)."""


class FunctionAdapter(Adapter):
    """An agent that is a Python function in this process (``type: function``). What the
    function raises or returns instead of a response fails its run as an agent's misbehaviour
    would (the traceback goes to the run's log)."""

    type = "function"
    summary = "an agent that is a Python callable in the ATP process: function: module:attribute"
    Settings = FunctionSettings

    async def start(self) -> None:
        """Import the function (``module:attribute``, dotted attributes allowed); raises
        :class:`~atp.core.errors.AdapterError` when it cannot be imported."""
        module_name, _, attribute = self.settings.function.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot import {self.settings.function!r}: {exc}"
            ) from None
        self.function: AgentFunction = target

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        """Call the function on the event loop (awaiting what it returns when awaitable). An
        ``AtpError`` or ``AgentError`` it raises passes through, as an adapter's would; any other
        exception (its traceback goes to the run's log), or a result that is not an
        :class:`ATPResponse`, is an :class:`~atp.core.errors.AgentError`."""
        try:
            result = self.function(request, sink)
            if inspect.isawaitable(result):
                result = await result
        except (AtpError, AgentError):  # the function speaks as an adapter would
            raise
        except Exception as exc:
            import traceback

            for line in traceback.format_exception(type(exc), exc, exc.__traceback__):
                for part in line.rstrip("\n").split("\n"):
                    sink.log(part)
            raise AgentError(
                f"the agent function {self.settings.function} raised {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(result, ATPResponse):
            raise AgentError(
                f"the agent function {self.settings.function} returned {type(result).__name__}, "
                f"not an ATPResponse",
                evidence=repr(result),
            )
        return result


class FunctionAdapterPlugin:
    """Register with ``plugins.register(FunctionAdapterPlugin(), "function-adapter")``."""

    @hookimpl
    def atp_register_adapters(self, register: Callable[[type[Adapter]], None]) -> None:
        """Register :class:`FunctionAdapter` (``type: function``)."""
        register(FunctionAdapter)


def response(
    *,
    task_id: str = "00000000-0000-0000-0000-000000000000",
    status: str = "completed",
    artifacts: Iterable[Artifact] = (),
    files: Mapping[str, str] | None = None,
    structured: Mapping[str, Any] | None = None,
    metrics: Metrics | None = None,
    error: str | None = None,
) -> ATPResponse:
    """A response: ``files`` become file artifacts with inline content, ``structured`` one
    structured artifact named ``result``."""
    items: list[Artifact] = list(artifacts)
    for path, content in (files or {}).items():
        items.append(FileArtifact(path=path, content=content))
    if structured is not None:
        items.append(StructuredArtifact(name="result", data=dict(structured)))
    return ATPResponse(
        version=PROTOCOL_VERSION,
        task_id=task_id,
        status=status,  # type: ignore[arg-type]
        artifacts=items,
        metrics=metrics or Metrics(),
        error=error,
    )


def make_test(test_id: str = "test", description: str = "a task", **constraints: Any) -> Test:
    """A test of id and name ``test_id`` whose task is ``description``; keyword arguments are
    its :class:`~atp.core.protocol.Constraints` (``timeout_seconds=5``), unchecked."""
    return Test(
        id=test_id,
        name=test_id,
        task=Task(description=description),
        constraints=Constraints(**constraints),
    )


async def evaluate(
    evaluator: type[Evaluator] | Evaluator,
    config: Mapping[str, Any] | msgspec.Struct,
    resp: ATPResponse,
    events: Iterable[Event] = (),
    test: Test | None = None,
) -> list[Check]:
    """Run one evaluator on one response and trace, with ``config`` validated as a suite would
    and what it returns checked as the runner checks it
    (:class:`~atp.core.evaluator.EvaluatorResultError`)."""
    instance = evaluator() if isinstance(evaluator, type) else evaluator
    if not isinstance(config, msgspec.Struct):
        config = msgspec.convert(dict(config), instance.Config)
    test = test or make_test()
    request = ATPRequest(
        version=PROTOCOL_VERSION,
        task_id=resp.task_id or str(uuid.uuid4()),
        task=test.task,
        constraints=test.constraints,
    )
    ctx = EvalContext(test=test, request=request, response=resp, trace=Trace.of(events))
    if is_async(instance):
        returned: Any = await instance.evaluate(ctx, config)
    else:
        returned = await anyio.to_thread.run_sync(instance.evaluate, ctx, config)
    return checked_result(f"evaluator {getattr(instance, 'name', type(instance).__name__)!r}", returned)


def run_evaluator(
    evaluator: type[Evaluator] | Evaluator,
    config: Mapping[str, Any] | msgspec.Struct,
    resp: ATPResponse,
    events: Iterable[Event] = (),
    test: Test | None = None,
) -> list[Check]:
    """:func:`evaluate`, from synchronous code."""
    return anyio.run(evaluate, evaluator, config, resp, events, test)
