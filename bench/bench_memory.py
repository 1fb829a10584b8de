"""Whole-process peak memory (max RSS) of ``atp test`` against the number of tests.

For each size, a suite of N instant tests (one ``artifact_exists`` check each, an in-process
agent) is run by a fresh Python process through the real CLI entry point (``python -m
atp.cli.main test SUITE``), once with the default reporter (console) and once with
``--output json --output-file FILE`` added; the figure is that child's own peak RSS
(``ru_maxrss`` from ``os.wait4`` on its pid).

    .venv/bin/python bench/bench_memory.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_overhead import suite_text
from common import ROOT, plugins

BENCH = Path(__file__).resolve().parent


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the agent's module (bench/memory_plugin.py) is imported by the in-process adapter
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def atp_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "atp.cli.main", *args]


def agent_entry() -> tuple[str, str, str | None]:
    """The in-process agent: the ``python`` adapter when it is installed, else the ``function``
    adapter (registered by bench/memory_plugin.py through the config when nothing does).
    Returns the suite's agent entry, the adapter's name and the config's text (or None)."""
    listing = subprocess.run(
        atp_command("plugins"), capture_output=True, text=True, env=child_env(), check=False
    ).stdout
    adapters = {
        name.strip()
        for line in listing.splitlines()
        if line.strip().startswith("adapters:")
        for name in line.split(":", 1)[1].split(",")
    }
    if "python" in adapters:
        return "{name: a, type: python, callable: 'memory_plugin:instant'}", "python", None
    entry = "{name: a, type: function, function: 'memory_plugin:instant_function'}"
    if "function" in adapters:
        return entry, "function", None
    return entry, "function", "plugins: [memory_plugin]\n"


def peak_rss(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``argv`` and return its own peak RSS in MiB and its wall time in seconds."""
    stderr = cwd / "stderr.txt"
    start = time.perf_counter()
    with stderr.open("wb") as err:
        process = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {process.returncode}:\n{stderr.read_text()}")
    return usage.ru_maxrss / 1024, seconds  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument(
        "--breakdown", type=int, default=10000, help="tests of the in-process breakdown (0: none)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    agent, kind, config = agent_entry()
    print(f"Peak RSS of one `atp test` process, N instant tests (in-process {kind!r} adapter),")
    print("one artifact_exists check per test, --parallel=1; ru_maxrss of the child via os.wait4")
    variants = {
        "console": [],
        "console+json": ["--output", "console", "--output", "json", "--output-file", "results.json"],
    }
    print(f"{'tests':>7}  " + "  ".join(f"{name:>22}" for name in variants))
    figures: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if config is not None:
            (work / "atp.config.yaml").write_text(config)
        peak_rss(atp_command("--help"), work)  # warm the file cache
        for size in sizes:
            (work / "suite.yaml").write_text(suite_text(agent, size))
            cells = []
            for name, extra in variants.items():
                argv = atp_command("test", "suite.yaml", "--run-dir", "runs", *extra)
                mib, seconds = peak_rss(argv, work)
                figures[name].append(mib)
                cells.append(f"{mib:8.1f} MiB ({seconds:5.1f}s)")
            print(f"{size:>7}  " + "  ".join(f"{c:>22}" for c in cells))
    if len(sizes) > 1:
        print("growth per test between sizes:")
        for index in range(1, len(sizes)):
            a, b = sizes[index - 1], sizes[index]
            cells = []
            for name in variants:
                per_test = (figures[name][index] - figures[name][index - 1]) * 1024 / (b - a)
                cells.append(f"{per_test:8.2f} KiB/test")
            print(f"  {a:>6} -> {b:<6}" + "  ".join(f"{c:>22}" for c in cells))
    if args.breakdown:
        breakdown(args.breakdown)


def breakdown(tests: int) -> None:
    """What is held at each step of ``atp test``, in process (tracemalloc), for ``tests`` tests."""
    steps(20)  # imports and first-call caches are not counted
    rows = steps(tests)
    print()
    print(f"In process (tracemalloc, 'function' adapter), {tests} tests: what each step holds")
    for label, size in rows:
        print(f"  {label:<56} {size / 2**20:7.2f} MiB  {size / tests:7.0f} B/test")


def steps(tests: int) -> list[tuple[str, float]]:
    import gc
    import io
    import tracemalloc

    import anyio

    from atp.core.config import agent_definitions, load_config, resolve_agent
    from atp.core.reporter import ReportOptions
    from atp.core.results import RunStore
    from atp.core.runner import Runner
    from atp.core.suite import load_suite
    from atp.reporters.console import ConsoleReporter
    from atp.reporters.json_results import JsonReporter

    loaded = plugins()
    agent_line = "{name: a, type: function, function: 'memory_plugin:instant_function'}"
    rows: list[tuple[str, float]] = []

    def held() -> float:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    def peak_since(start: float) -> float:
        peak = tracemalloc.get_traced_memory()[1] - start
        tracemalloc.reset_peak()
        return peak

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = work / "suite.yaml"
        path.write_text(suite_text(agent_line, tests))
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            suite = load_suite(path, loaded.evaluators)
            rows.append(("peak while loading the suite (transient)", peak_since(base)))
            kept = held()
            rows.append(("the loaded suite (Test Structs), held to the end", kept - base))
            agent = resolve_agent(agent_definitions(load_config(cwd=work), suite)["a"], loaded.adapters)
            runner = Runner(loaded, suite, suite.tests, agent, run_root=work / "runs")
            results = anyio.run(runner.run)
            assert runner.store is not None and results.summary.passed == tests
            after_run = held()
            del results
            before = held()
            results = RunStore.open(runner.store.directory).results()
            read_back = held() - before
            rows.append(("the results read back (SuiteResults), held to the end", read_back))
            rows.append(
                ("the rest of the run (runner, header), held to the end", after_run - kept - read_back)
            )
            start = held()
            tracemalloc.reset_peak()
            ConsoleReporter(ReportOptions(stream=io.StringIO())).report(results, runner.store)
            rows.append(("console report, its text in a StringIO (transient)", peak_since(start)))
            JsonReporter(ReportOptions(output_file=work / "results.json")).report(results, runner.store)
            rows.append(("json report: the document, whole (transient)", peak_since(start)))
        finally:
            tracemalloc.stop()
    return rows


if __name__ == "__main__":
    main()
