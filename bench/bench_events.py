"""Events from a live agent: decoded, stored and evaluated, per second; and memory against N.

    .venv/bin/python bench/bench_events.py [--events 100000]

1. A live agent (bench/event_agent.py, over the cli adapter) sends N events in one run; the
   run's events/s counts everything: the agent writing them, ATP decoding, storing and
   evaluating them (three trace checks).
2. The same lines fed to the adapter's line handler in-process: ATP's own events/s.
3. Peak memory (tracemalloc) of the in-process path for 10x more events each time: it must not
   grow with N, since events go to the run's events file, not to memory.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

from common import ROOT, Timer, plugins

AGENT = ROOT / "bench" / "event_agent.py"
TID = "550e8400-e29b-41d4-a716-446655440000"


def live_run(events: int) -> tuple[float, int]:
    """One run of one test whose agent sends ``events`` events; the Runner's wall time."""
    import anyio

    from atp.core.config import agent_definitions, load_config, resolve_agent
    from atp.core.runner import Runner
    from atp.core.suite import load_suite

    with tempfile.TemporaryDirectory() as tmp:
        suite_file = Path(tmp) / "suite.yaml"
        suite_file.write_text(
            "test_suite: events\n"
            f"agents:\n  - {{name: a, type: cli, command: ['{sys.executable}', '{AGENT}', '{events}']}}\n"
            "tests:\n  - id: flood\n    task: {description: go}\n    assertions:\n"
            f"      - {{type: behavior, config: {{must_use_tools: [web_search], max_tool_calls: {events}, no_errors: true}}}}\n"
        )
        loaded = plugins()
        suite = load_suite(suite_file, loaded.evaluators)
        agent = resolve_agent(agent_definitions(load_config(cwd=Path(tmp)), suite)["a"], loaded.adapters)
        runner = Runner(loaded, suite, suite.tests, agent, run_root=Path(tmp) / "runs")
        with Timer() as timer:
            results = anyio.run(runner.run)
        run = results.tests[0].runs[0]
        assert run.outcome == "passed" and run.trace.events == events, (run.error, run.trace.events)
        return timer.seconds, run.trace.events


def agent_alone(events: int) -> float:
    with Timer() as timer:
        subprocess.run(
            [sys.executable, str(AGENT), str(events)],
            input=b'{"task_id":"%s"}\n' % TID.encode(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
    return timer.seconds


def lines(events: int) -> list[bytes]:
    head = '{"version":"1.0","task_id":"%s","timestamp":"2026-01-01T00:00:00.000000Z","sequence":' % TID
    tail = ',"event_type":"tool_call","payload":{"tool":"web_search","input":{"query":"q"},"duration_ms":1.5,"status":"success"}}'
    return [(head + str(i) + tail).encode() for i in range(events)]


def in_process(
    events: int, *, chunks: int = 1000, measure_memory: bool = False, secrets: tuple[str, ...] = ()
) -> tuple[float, float]:
    """Feed N event lines through the cli adapter's line handling into a run trace; evaluate."""
    import anyio

    from atp.adapters.stdio import StderrLines
    from atp.core.evaluator import EvalContext
    from atp.core.protocol import ATPRequest, ATPResponse, Metrics, Task
    from atp.core.secrets import Masker
    from atp.core.testing import make_test
    from atp.core.trace import RunTrace
    from atp.evaluators.behavior import Behavior, BehaviorConfig

    template = lines(1)[0].replace(b'"sequence":0', b'"sequence":%d')
    with tempfile.TemporaryDirectory() as tmp:
        if measure_memory:
            tracemalloc.start()
        with Timer() as timer:
            trace = RunTrace(
                TID, events_path=Path(tmp) / "events.jsonl", log_path=None, masker=Masker(secrets)
            )
            stderr = StderrLines(trace, max_line=4 * 2**20)
            for start in range(0, events, chunks):
                # blocks of complete lines, as the adapter cuts them from what the pipe delivers
                block = b"\n".join([template % i for i in range(start, min(start + chunks, events))])
                stderr.feed(block + b"\n")
            trace.close()
            request = ATPRequest(version="1.0", task_id=TID, task=Task(description="x"))
            response = ATPResponse(
                version="1.0", task_id=TID, status="completed", artifacts=[], metrics=Metrics()
            )
            ctx = EvalContext(test=make_test(), request=request, response=response, trace=trace.trace())
            config = BehaviorConfig(must_use_tools=["web_search"], max_tool_calls=events, no_errors=True)
            checks = anyio.run(Behavior().evaluate, ctx, config)
        peak = 0.0
        if measure_memory:
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        assert all(c.passed for c in checks) and trace.summary.events == events
        return timer.seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    n = args.events

    live_run(10_000)  # warm up: the first subprocess and event loop of a process cost extra
    print(f"1. live agent over the cli adapter, {n} events in one run (best of 3)")
    seconds = min(live_run(n)[0] for _ in range(3))
    alone = min(agent_alone(n) for _ in range(3))
    print(
        f"   the whole run:        {seconds:6.3f}s  {n / seconds:10,.0f} events/s (agent start-up included)"
    )
    print(f"   the agent by itself:  {alone:6.3f}s  (start-up and writing its events to /dev/null)")

    print(f"2. ATP alone (decode + store + summarise + evaluate), in-process, {n} events")
    best = min(in_process(n)[0] for _ in range(3))
    print(f"   {best:6.3f}s  {n / best:10,.0f} events/s  {best / n * 1e6:5.2f} µs/event")

    for label, secret in (("absent from the events", "sk-not-there-1234"), ("in every event", "web_search")):
        best = min(in_process(n, secrets=(secret,))[0] for _ in range(3))
        print(f"   with a secret {label}: {best:6.3f}s  {n / best:10,.0f} events/s")

    print("3. peak traced memory of the in-process path against the number of events")
    for size in (10_000, 100_000, 1_000_000):
        _, peak = in_process(size, measure_memory=True)
        print(f"   {size:>9,} events: {peak:6.2f} MiB")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
