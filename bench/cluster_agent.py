"""An in-process agent for bench/bench_cluster.py (the ``python`` adapter imports it): it takes
100 ms, waiting on the event loop as an agent waiting on a model would, then answers."""

from typing import Any

import anyio

DELAY_SECONDS = 0.1


async def slow(request: Any, emit: Any) -> dict[str, Any]:
    await anyio.sleep(DELAY_SECONDS)
    return {
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True}}],
        "metrics": {},
    }
