"""HTTP agents: the whole ``atp test`` command against a loopback HTTP agent (bench/http_agent.py).

1. 100 runs, the agent taking 100 ms per request, ``--parallel=100``: wall time of the command.
2. The same over Server-Sent Events, 1,000 events per run.
3. ATP's own CPU per HTTP run: the command's CPU for 1,000 instant runs less its CPU for one
   run (start-up, suite loading, the report), divided by 999; synchronous and streaming.

    .venv/bin/python bench/bench_http.py [--runs 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

AGENT = ROOT / "bench" / "http_agent.py"
ATP = Path(sys.executable).with_name("atp")


class Agent:
    """The loopback agent, in a process of its own."""

    def __init__(self, delay: float, events: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(AGENT), "--port", "0", "--delay", str(delay), "--events", str(events)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.port = int(line.rsplit(" ", 1)[1])

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


def suite(port: int, runs: int, stream: bool) -> str:
    return (
        "test_suite: bench-http\n"
        "agents:\n"
        f"  - {{name: a, type: http, endpoint: 'http://127.0.0.1:{port}', stream: {str(stream).lower()}}}\n"
        "tests:\n"
        "  - id: t\n"
        f"    runs_per_test: {runs}\n"
        "    task: {description: answer}\n"
        "    assertions:\n"
        "      - {type: artifact_exists, config: {name: result}}\n"
    )


def atp_test(folder: Path, text: str, parallel: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one ``atp test`` command."""
    path = folder / "suite.yaml"
    path.write_text(text)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [
            str(ATP),
            "test",
            str(path),
            f"--parallel={parallel}",
            "--output=json",
            f"--output-file={folder / 'r.json'}",
        ],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"atp test failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--cpu-runs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, stream, events in (
            ("sync /execute", False, 0),
            (f"SSE, {args.events} events/run", True, args.events),
        ):
            agent = Agent(0.1, events)
            try:
                atp_test(folder, suite(agent.port, 5, stream), 5)  # warm up
                walls = [
                    atp_test(folder, suite(agent.port, args.runs, stream), args.runs)[0]
                    for _ in range(args.repeat)
                ]
            finally:
                agent.close()
            print(
                f"{label:28} {args.runs} runs x 100 ms, --parallel={args.runs}: whole command "
                f"median {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f})"
            )
        for label, stream, events in (("sync /execute", False, 0), ("SSE, 10 events/run", True, 10)):
            agent = Agent(0.0, events)
            try:
                one = min(atp_test(folder, suite(agent.port, 1, stream), 1)[1] for _ in range(args.repeat))
                many = min(
                    atp_test(folder, suite(agent.port, args.cpu_runs, stream), 10)[1] for _ in range(3)
                )
            finally:
                agent.close()
            per_run = (many - one) / (args.cpu_runs - 1)
            print(
                f"{label:28} ATP CPU per run: {per_run * 1000:.3f} ms "
                f"({args.cpu_runs} runs {many:.3f} s, 1 run {one:.3f} s, --parallel=10)"
            )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
