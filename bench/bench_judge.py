"""What an ``llm_eval`` check costs ATP itself: against a Messages API server on loopback that
answers at once (tests/judge_server.py), the time per check asked of the server through the
``anthropic`` SDK, the time per check answered from the on-disk cache, and the SDK's bare
round trip for the same request (so ATP's own share is the difference).

    .venv/bin/python bench/bench_judge.py [--checks 200] [--concurrent 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import common  # noqa: F401 - puts the repository on sys.path, for tests.judge_server
import msgspec

from atp.core.evaluator import EvalContext
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from atp.evaluators.judge.evaluator import LlmEval, LlmEvalConfig
from tests.judge_server import JudgeServer

KEY = "sk-bench"


def contexts(count: int) -> list[EvalContext]:
    test = make_test(description="Summarise the report in three bullet points.")
    found = []
    for index in range(count):
        resp = response(files={"report.md": f"- point {index}\n- another point\n- a third point\n" * 20})
        request = ATPRequest(
            version=PROTOCOL_VERSION, task_id=resp.task_id, task=test.task, constraints=test.constraints
        )
        found.append(EvalContext(test=test, request=request, response=resp, trace=Trace.of(())))
    return found


async def judge_all(evaluator: LlmEval, items: list[EvalContext], concurrent: int) -> float:
    config = msgspec.convert({"criteria": "clarity"}, LlmEvalConfig)
    limiter = anyio.CapacityLimiter(concurrent)

    async def one(ctx: EvalContext) -> None:
        async with limiter:
            (check,) = await evaluator.evaluate(ctx, config)
            assert check.passed

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for ctx in items:
            group.start_soon(one, ctx)
    await evaluator.aclose()
    return time.perf_counter() - started


async def bare_round_trips(url: str, count: int) -> list[float]:
    import anthropic

    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "x"}]
        )
        times.append(time.perf_counter() - started)
    await client.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=4)
    args = parser.parse_args()
    items = contexts(args.checks)
    with tempfile.TemporaryDirectory() as folder, JudgeServer() as server:
        settings = {
            "base_url": server.url,
            "api_key": KEY,
            "cache_dir": str(Path(folder) / "cache"),
            "max_concurrent": args.concurrent,
        }
        anyio.run(bare_round_trips, server.url, 5)  # warm: imports, connections
        bare = anyio.run(bare_round_trips, server.url, 50)
        asked = anyio.run(judge_all, LlmEval(settings), items, args.concurrent)
        assert len(server.requests) == 55 + args.checks
        cached = anyio.run(judge_all, LlmEval(settings), items, args.concurrent)
        assert len(server.requests) == 55 + args.checks
    per_asked = asked / args.checks * 1000
    per_cached = cached / args.checks * 1000
    median_bare = statistics.median(bare) * 1000
    print(f"SDK round trip to the loopback server, one at a time: median {median_bare:.2f} ms")
    print(
        f"{args.checks} llm_eval checks asked of the server, {args.concurrent} at a time: {asked:.2f} s ({per_asked:.2f} ms per check)"
    )
    print(f"the same {args.checks} checks from the cache: {cached:.3f} s ({per_cached:.2f} ms per check)")


if __name__ == "__main__":
    main()
