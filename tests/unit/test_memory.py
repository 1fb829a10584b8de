"""Memory against the number of tests: what a loaded suite keeps, and the peak of loading,
running and reporting a suite in process, measured with tracemalloc at 1,000 and 4,000 tests.

The bounds are per test, with room for the allocator's steps; the code before these checks
(a suite keeping every YAML node of its file, the JSON report built in three whole copies)
kept 6.9 KiB per test after loading, 7.7 KiB per test at the peak of loading and 12.8 KiB per
test at the peak of the whole; with them, 0.4, 0.9 and 4.0 KiB (bench/bench_memory.py measures
the whole ``atp test`` process)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, ATPResponse, Metrics, StructuredArtifact
from atp.core.reporter import ReportOptions
from atp.core.runner import Runner
from atp.core.suite import load_suite
from atp.reporters.console import ConsoleReporter
from atp.reporters.json_results import JsonReporter
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # seconds each (simulations, property tests over many examples)

SMALL, LARGE = 1000, 4000

_ARTIFACTS = [StructuredArtifact(name="result", data={"answer": 42})]


def instant(request: ATPRequest, sink: Any) -> ATPResponse:
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=_ARTIFACTS,
        metrics=Metrics(total_steps=1),
    )


def suite_text(tests: int) -> str:
    lines = [
        "test_suite: memory",
        "agents:",
        "  - {name: a, type: function, function: 'tests.unit.test_memory:instant'}",
        "tests:",
    ]
    for i in range(tests):
        lines += [
            f"  - id: t{i}",
            "    task: {description: answer}",
            "    assertions:",
            "      - {type: artifact_exists, config: {name: result}}",
        ]
    return "\n".join(lines) + "\n"


class Discard:
    """A stream that keeps nothing (the console report's text is not what is measured)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class Measured:
    loaded_peak = 0
    """Traced bytes at the peak of loading the suite."""
    kept = 0
    """Traced bytes the loaded suite holds."""
    peak = 0
    """Traced bytes at the peak of the whole: loading, running, reading back, reporting."""


def measure(folder: Path, plugins: Plugins, tests: int) -> Measured:
    folder.mkdir()
    path = folder / "suite.yaml"
    path.write_text(suite_text(tests))
    measured = Measured()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        suite = load_suite(path, plugins.evaluators)
        measured.loaded_peak = tracemalloc.get_traced_memory()[1] - base
        gc.collect()
        measured.kept = tracemalloc.get_traced_memory()[0] - base
        agent = resolve_agent(agent_definitions(load_config(cwd=folder), suite)["a"], plugins.adapters)
        runner = Runner(plugins, suite, suite.tests, agent, run_root=folder / "runs")
        results = anyio.run(runner.run)
        assert results.summary.passed == tests
        assert runner.store is not None
        ConsoleReporter(ReportOptions(stream=Discard())).report(results, runner.store)  # type: ignore[arg-type]
        JsonReporter(ReportOptions(output_file=folder / "results.json")).report(results, runner.store)
        measured.peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return measured


def per_test(small: int, large: int) -> float:
    return (large - small) / (LARGE - SMALL)


def measured_per_test(folder: Path) -> dict[str, float]:
    """The figures per test, measured in this process (the subprocess below runs this)."""
    from tests.conftest import builtin_plugins

    plugins = builtin_plugins()
    measure(folder / "warm-up", plugins, 20)  # imports and first-call caches are not counted
    small = measure(folder / "small", plugins, SMALL)
    large = measure(folder / "large", plugins, LARGE)
    return {
        "kept": per_test(small.kept, large.kept),
        "loaded_peak": per_test(small.loaded_peak, large.loaded_peak),
        "peak": per_test(small.peak, large.peak),
    }


def test_memory_per_test_is_what_the_suite_and_its_results_need(tmp_path: Path) -> None:
    # Measured in a fresh interpreter: tracemalloc counts every thread's allocations, and
    # threads other tests left running (an in-process agent abandoned at its time limit runs
    # on) would be counted as this suite's.
    script = f"import json; from tests.unit.test_memory import measured_per_test; print(json.dumps(measured_per_test(__import__('pathlib').Path({str(tmp_path)!r}))))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])

    # A loaded suite keeps its Test Structs, not its file's YAML nodes or data.
    assert figures["kept"] < 1024
    # Loading never holds every test's nodes at once.
    assert figures["loaded_peak"] < 3 * 1024
    # The peak: the results read back (~2.1 KiB a run), the JSON document (~1.4 KiB a test
    # here), the suite (~0.4 KiB), each test's statistics (~2.5 KiB: the score, its components
    # and six metrics, each with its own figures, in the results and in the JSON).
    assert figures["peak"] < 9 * 1024
