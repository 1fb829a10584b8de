"""The in-process agent of bench/bench_memory.py, and a plugin for ATP versions without the
``python`` adapter.

With the ``python`` adapter installed the suite names ``callable: memory_plugin:instant``. Without
it, a config listing this module under ``plugins:`` registers the kernel's ``function`` adapter
(``type: function``, ``function: memory_plugin:instant_function``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from atp.core.hookspecs import hookimpl
from atp.core.protocol import ATPRequest, ATPResponse, Metrics, StructuredArtifact

_ARTIFACTS = [StructuredArtifact(name="result", data={"answer": 42})]


def _answer(request: ATPRequest) -> ATPResponse:
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=_ARTIFACTS,
        metrics=Metrics(total_steps=1),
    )


async def instant(request: ATPRequest, emit: Any) -> ATPResponse:
    """Answers at once, on ATP's event loop (an ``async def`` needs no worker thread)."""
    return _answer(request)


def instant_function(request: ATPRequest, sink: Any) -> ATPResponse:
    """The same, for the ``function`` adapter."""
    return _answer(request)


@hookimpl
def atp_register_adapters(register: Callable[[type[Any]], None]) -> None:
    from atp.core.testing import FunctionAdapter

    register(FunctionAdapter)
