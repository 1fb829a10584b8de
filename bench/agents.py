"""In-process agents for the benchmarks (the ``function`` adapter imports them by name)."""

from atp.core.protocol import ATPRequest, ATPResponse, Metrics, StructuredArtifact
from atp.core.trace import EventSink

_ARTIFACTS = [StructuredArtifact(name="result", data={"answer": 42})]


def instant(request: ATPRequest, sink: EventSink) -> ATPResponse:
    """Answers at once: everything measured with it is ATP's own time."""
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=_ARTIFACTS,
        metrics=Metrics(total_steps=1),
    )
