"""One probe of ``atp validate``: a request made for it, sent through the adapter within the
time limit, and what came back (a response, the exception that ended it, or nothing in time)."""

from __future__ import annotations

import math
import time
import uuid
from typing import TYPE_CHECKING, Any

from atp.core.validation.exceptions import single_exception
from atp.core.validation.sink import ProbeSink

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.protocol import ATPRequest, ATPResponse
    from atp.core.validation.context import CheckContext

__all__ = ["MALFORMED_WHAT", "PROBE_DESCRIPTION", "Answer", "make_request", "send"]

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


async def send(adapter: Adapter, request: ATPRequest, context: CheckContext) -> Answer:
    """``request`` through the adapter, in a fresh sink, within the time limit."""
    import anyio

    from atp.core.protocol import ATPResponse

    answer = Answer(request, ProbeSink(request.task_id, context.masker))
    started = time.perf_counter()
    returned: Any = _NOTHING
    try:
        with anyio.move_on_after(context.timeout) as limit:
            returned = await adapter.execute(request, answer.sink)
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
