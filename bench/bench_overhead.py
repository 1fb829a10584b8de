"""ATP's own overhead per run: N tests against an in-process instant agent, and against the cli
adapter's reference agent (the protocol document's minimal agent) compared with starting that
agent by hand.

    .venv/bin/python bench/bench_overhead.py [--sizes 250,1000,4000] [--cli-runs 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

from common import ROOT, Timer, max_rss_mib, plugins

from atp.core.hookspecs import hookimpl

MINIMAL_AGENT = ROOT / "examples" / "agents" / "minimal_agent.py"


def suite_text(agent: str, tests: int) -> str:
    lines = ["test_suite: bench", "agents:", f"  - {agent}", "tests:"]
    for i in range(tests):
        lines += [
            f"  - id: t{i}",
            "    task: {description: answer}",
            "    assertions:",
            "      - {type: artifact_exists, config: {name: result}}",
        ]
    return "\n".join(lines) + "\n"


class MemoryProbe:
    """Traced memory held after a quarter of the runs and after the last one."""

    def __init__(self, tests: int) -> None:
        self.quarter = max(tests // 4, 1)
        self.last = tests
        self.done = 0
        self.at_quarter = 0
        self.growth = 0.0

    @hookimpl
    def atp_run_finished(self, result: object) -> None:
        self.done += 1
        if self.done == self.quarter:
            self.at_quarter = tracemalloc.get_traced_memory()[0]
        if self.done == self.last:
            self.growth = (tracemalloc.get_traced_memory()[0] - self.at_quarter) / 2**20


def run_suite(agent: str, tests: int, parallel: int = 1, memory: bool = False) -> tuple[float, float, float]:
    """Wall seconds the Runner takes for ``tests`` tests, the CPU seconds of this process (not
    of the agents it starts) meanwhile, and how much traced memory grew from 25% to 100%."""
    import anyio

    from atp.core.config import agent_definitions, load_config, resolve_agent
    from atp.core.runner import Runner
    from atp.core.suite import load_suite

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "suite.yaml"
        path.write_text(suite_text(agent, tests))
        loaded = plugins()
        suite = load_suite(path, loaded.evaluators)
        resolved = resolve_agent(agent_definitions(load_config(cwd=Path(tmp)), suite)["a"], loaded.adapters)
        runner = Runner(loaded, suite, suite.tests, resolved, run_root=Path(tmp) / "runs", parallel=parallel)
        probe = MemoryProbe(tests)
        if memory:
            loaded.register(probe, "memory-probe")
            tracemalloc.start()
        cpu = time.process_time()
        with Timer() as timer:
            results = anyio.run(runner.run)
        cpu = time.process_time() - cpu
        tracemalloc.stop()
        assert results.summary.passed == tests, results.summary
        return timer.seconds, cpu, probe.growth


def bare_agent_seconds(runs: int) -> tuple[float, float]:
    """The same agent started by hand, request in, response out: the floor under the cli
    adapter. Wall seconds, and CPU seconds of this process."""
    cpu = time.process_time()
    with Timer() as timer:
        for _ in range(runs):
            request = '{"version":"1.0","task_id":"%s","task":{"description":"answer"}}\n' % uuid.uuid4()
            subprocess.run(
                [sys.executable, str(MINIMAL_AGENT)], input=request.encode(), capture_output=True, check=True
            )
    return timer.seconds, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="250,1000,4000")
    parser.add_argument("--cli-runs", type=int, default=1000)
    args = parser.parse_args()

    print("In-process instant agent (function adapter), one artifact_exists check per test, --parallel=1")
    print(f"{'tests':>7} {'total':>9} {'per run':>10}   memory growth from 25% to 100% of the runs")
    instant = "{name: a, type: function, function: 'agents:instant'}"
    run_suite(instant, 50)  # warm up
    for size in (int(s) for s in args.sizes.split(",")):
        seconds = min(run_suite(instant, size)[0] for _ in range(3))
        _, _, growth = run_suite(instant, size, memory=True)
        print(f"{size:>7} {seconds:8.3f}s {seconds / size * 1e6:8.1f}µs   {growth:+7.3f} MiB")
    print(f"max RSS of this process: {max_rss_mib():.1f} MiB")

    runs = args.cli_runs
    if runs:
        rounds = 5
        size = max(runs // rounds, 1)
        print()
        print(
            f"cli adapter, the protocol document's minimal agent, {rounds} rounds of {size} tests, --parallel=1"
        )
        print("(each round runs the suite through ATP, then starts the same agent as often by hand;")
        print(" the difference is ATP's own time, the median over the rounds is reported)")
        command = f"{{name: a, type: cli, command: ['{sys.executable}', '{MINIMAL_AGENT}']}}"
        through, alone, overhead, cpu, bare_cpu = [], [], [], [], []
        for _ in range(rounds):
            atp_seconds, atp_cpu, _ = run_suite(command, size)
            bare, spawn_cpu = bare_agent_seconds(size)
            through.append(atp_seconds / size)
            alone.append(bare / size)
            overhead.append((atp_seconds - bare) / size)
            cpu.append(atp_cpu / size)
            bare_cpu.append(spawn_cpu / size)
        print(f"  through ATP:          {statistics.median(through) * 1000:7.2f} ms/run")
        print(f"  agent started alone:  {statistics.median(alone) * 1000:7.2f} ms/run")
        print(
            f"  wall-clock difference {statistics.median(overhead) * 1000:7.2f} ms/run "
            f"(rounds: {', '.join(f'{o * 1000:.2f}' for o in overhead)})"
        )
        print(f"  CPU time of ATP's process:        {statistics.median(cpu) * 1000:5.2f} ms/run")
        print(
            f"  CPU time of the by-hand starter:  {statistics.median(bare_cpu) * 1000:5.2f} ms/run "
            "(subprocess.run: spawning and piping alone)"
        )
        print(
            f"  ATP's own CPU beyond that:        {(statistics.median(cpu) - statistics.median(bare_cpu)) * 1000:5.2f} ms/run"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
