"""Many instant tests against a Python agent, three ways, paired in one sitting: a stdio agent
started for every run (the protocol's default), the same agent with ``persistent: true`` (one
process serves many runs), and the same answer from an in-process ``python`` agent; with the
in-process overhead benchmark's agent (the kernel's ``function`` test adapter) as the floor.

    .venv/bin/python bench/bench_persistent.py [--tests 1000] [--parallel 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_overhead import run_suite
from common import ROOT, max_rss_mib

BENCH = ROOT / "bench"
AGENT = BENCH / "stdio_agent.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    tests, parallel = args.tests, args.parallel

    command = f"['{sys.executable}', '{AGENT}']"
    modes = {
        "stdio, a process per run": f"{{name: a, type: cli, command: {command}}}",
        "stdio, persistent: true": f"{{name: a, type: cli, command: {command}, persistent: true}}",
        "python adapter (in-process)": f"{{name: a, type: python, callable: 'agents:instant', path: ['{BENCH}']}}",
        "function adapter (the floor)": "{name: a, type: function, function: 'agents:instant'}",
    }
    run_suite(modes["stdio, persistent: true"], 20, parallel)  # warm up
    print(f"{tests} instant tests, one artifact_exists check each, --parallel={parallel}, one sitting")
    print(f"{'':32} {'total':>9} {'per test':>10} {'ATP CPU/test':>13}")
    figures: dict[str, float] = {}
    for label, agent in modes.items():
        seconds, cpu, _ = run_suite(agent, tests, parallel)
        figures[label] = seconds / tests
        print(f"{label:32} {seconds:8.3f}s {seconds / tests * 1000:8.3f}ms {cpu / tests * 1000:10.3f}ms")
    per_run, persistent = figures["stdio, a process per run"], figures["stdio, persistent: true"]
    python, floor = figures["python adapter (in-process)"], figures["function adapter (the floor)"]
    print(f"persistent is {per_run / persistent:.1f}x faster than a process per run")
    print(f"the python adapter costs {(python - floor) * 1000:.3f} ms per test more than the floor")
    print(f"max RSS of this process: {max_rss_mib():.1f} MiB")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
