"""What statistics and baseline comparisons cost.

1. A suite of 50 tests x 20 runs: ``build_suite_results`` with its statistics against the same
   without them (``test_statistics`` and ``suite_statistics`` replaced by stubs), and the two
   functions timed on their own.
2. ``atp baseline compare`` of two result sets of 1,000 tests x 10 runs: reading the baseline
   file, ``atp.core.baseline.compare`` alone, building the results with the comparison, and the
   whole command on a run directory written here; then the same for tests run under
   ``runs_per_test: auto``, whose comparison replays the sequential rule.

    .venv/bin/python bench/bench_stats.py [--tests 50] [--runs 20] [--compare-tests 1000]
                                          [--compare-runs 10] [--repeat 20] [--command-repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from common import ROOT, Timer

from atp.core import aggregate as results_module  # where build_suite_results looks the statistics up
from atp.core.adaptive import Adaptive, replay
from atp.core.baseline import Compared, compare, encode_baseline, read_baseline, sequential_alpha
from atp.core.protocol import Metrics
from atp.core.results import (
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    SuiteStatistics,
    baseline_of,
    build_suite_results,
    suite_statistics,
    test_statistics,
)
from atp.core.stats import t_quantile

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_runs(tests: int, runs: int, seed: int, shift: dict[int, float] | None = None) -> list[RunResult]:
    """``runs`` results of each of ``tests`` tests, as a run of an agent scored on all four
    components reports them, in the order they would finish (round by round)."""
    draw = random.Random(seed)
    shift = shift or {}
    made = []
    for run in range(1, runs + 1):
        for test in range(tests):
            score = min(100.0, max(0.0, draw.gauss(70 + test % 20 + shift.get(test, 0.0), 8)))
            steps = draw.randint(5, 40)
            tokens = steps * draw.randint(80, 160)
            made.append(
                RunResult(
                    test_id=f"t{test:04d}",
                    run_number=run,
                    task_id=f"task-{test}-{run}",
                    outcome="passed" if score >= 60 else "failed",
                    status="completed",
                    score=round(score, 4),
                    score_breakdown={
                        "quality": draw.random(),
                        "completeness": draw.random(),
                        "efficiency": 1 - steps / 50,
                        "cost": draw.random(),
                    },
                    duration_seconds=draw.uniform(0.5, 5.0),
                    started_at=START + timedelta(seconds=run * tests + test),
                    metrics=Metrics(
                        total_tokens=tokens,
                        total_steps=steps,
                        tool_calls=steps // 3,
                        llm_calls=steps // 2,
                        cost_usd=tokens * 2e-6,
                    ),
                )
            )
    return made


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def make_header(tests: int, runs: int, adaptive: Adaptive | None = None) -> RunHeader:
    return RunHeader(
        run_id="bench-stats",
        suite="bench",
        agent="agent",
        agent_type="function",
        started_at=START,
        finished_at=START + timedelta(hours=1),
        tests=[
            PlannedTest(id=f"t{i:04d}", name=f"t{i:04d}", runs=runs, adaptive=adaptive, fingerprint=f"f{i}")
            for i in range(tests)
        ],
    )


def median_ms(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The median and the fastest of ``repeat`` timings of ``action``, in milliseconds. The
    cache of Student's t quantiles is emptied before each, as it is in a new ``atp`` process."""
    action()  # warm up: imports
    times = []
    for _ in range(repeat):
        t_quantile.cache_clear()
        with Timer() as timer:
            action()
        times.append(timer.seconds * 1000)
    return statistics.median(times), min(times)


def without_statistics(header: RunHeader, runs: list[RunResult]) -> object:
    """``build_suite_results`` with the statistics replaced by stubs that cost nothing."""
    saved = results_module.test_statistics, results_module.suite_statistics
    results_module.test_statistics = lambda runs: None  # type: ignore[assignment,return-value]
    results_module.suite_statistics = lambda tests: SuiteStatistics()
    try:
        return build_suite_results(header, runs)
    finally:
        results_module.test_statistics, results_module.suite_statistics = saved


def quantile_us() -> float:
    """The time of one Student's t quantile at a fractional number of degrees of freedom (as a
    Welch test asks for), in microseconds."""
    t_quantile.cache_clear()
    with Timer() as timer:
        for i in range(200):
            t_quantile(0.975, 10.0 + i / 1000)
    return timer.seconds / 200 * 1e6


def suite_statistics_section(tests: int, runs: int, repeat: int) -> None:
    header = make_header(tests, runs)
    made = make_runs(tests, runs, seed=1)
    by_test: dict[str, list[RunResult]] = {}
    for run in made:
        by_test.setdefault(run.test_id, []).append(run)
    built = build_suite_results(header, made)

    def own() -> None:
        for test_runs in by_test.values():
            test_statistics(test_runs)
        suite_statistics(built.tests)

    with_stats, with_best = median_ms(lambda: build_suite_results(header, made), repeat)
    without, without_best = median_ms(lambda: without_statistics(header, made), repeat)
    direct, direct_best = median_ms(own, repeat)
    adaptive_header = make_header(tests, runs, Adaptive(max_runs=runs))
    auto, auto_best = median_ms(lambda: build_suite_results(adaptive_header, made), repeat)
    print(f"1. statistics of {tests} tests x {runs} runs (median of {repeat}, fastest in brackets)")
    print(f"   build_suite_results, with statistics       {with_stats:8.2f} ms  ({with_best:.2f})")
    print(f"   build_suite_results, statistics stubbed    {without:8.2f} ms  ({without_best:.2f})")
    print(f"   added by the statistics                    {with_stats - without:8.2f} ms")
    print(
        f"   test_statistics x {tests} + suite_statistics   {direct:8.2f} ms  ({direct_best:.2f})"
        f"  {direct / tests * 1000:.0f} µs per test"
    )
    print(
        f"   the same tests under runs_per_test: auto   {auto:8.2f} ms  ({auto_best:.2f})"
        f"  (each test's stop replayed)"
    )


def write_run_dir(root: Path, header: RunHeader, made: list[RunResult]) -> Path:
    store = RunStore.create(root, header)
    try:
        for run in made:
            store.append(run)
    finally:
        store.close()
    return store.directory


def command_seconds(argv: list[str], repeat: int) -> tuple[float, float, int]:
    """The median and fastest wall time of a command, and its exit code."""
    code = subprocess.run(argv, capture_output=True).returncode  # warm the file cache
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        code = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), code


def baseline_section(
    tests: int, runs: int, repeat: int, command_repeat: int, adaptive: Adaptive | None
) -> None:
    worse = {i: -12.0 for i in range(0, tests, 50)}  # 2 % of the tests regressed by 12 points
    header = make_header(tests, runs, adaptive)
    saved = build_suite_results(header, make_runs(tests, runs, seed=2))
    current = make_runs(tests, runs, seed=3, shift=worse)
    atp = str(Path(sys.executable).parent / "atp")
    label = "runs_per_test: auto (sequential rule)" if adaptive is not None else "fixed runs (Welch + Holm)"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "baseline.json"
        path.write_bytes(encode_baseline(baseline_of(saved)))
        baseline = read_baseline(path)
        run_dir = write_run_dir(Path(tmp) / "runs", header, current)
        scores: dict[str, list[float]] = {}
        for run in current:
            scores.setdefault(run.test_id, []).append(run.score)
        alpha = sequential_alpha(sum(1 for p in header.tests if p.adaptive is not None), "holm")

        def compared() -> list[Compared]:
            """Each test as the comparison takes it, an adaptive test's stop replayed."""
            return [
                Compared(
                    id=p.id,
                    scores=scores[p.id],
                    fingerprint=p.fingerprint,
                    adaptive=p.adaptive,
                    stop=replay(p.adaptive, scores[p.id], baseline.tests[p.id].sample(), alpha)
                    if p.adaptive
                    else None,
                )
                for p in header.tests
            ]

        reading, _ = median_ms(lambda: read_baseline(path), repeat)
        kernel, kernel_best = median_ms(lambda: compare(baseline, "bench", compared()), repeat)
        built, built_best = median_ms(lambda: build_suite_results(header, current, None, baseline), repeat)
        plain, _ = median_ms(lambda: build_suite_results(header, current), repeat)
        t_quantile.cache_clear()
        summary, _ = compare(baseline, "bench", compared())
        quantiles = t_quantile.cache_info().misses
        print(f"2. baseline comparison, {tests} tests x {runs} runs on each side, {label}")
        print(
            f"   ({plural(summary.regressions_holm, 'regression')} after Holm's correction, {summary.regressions} without;"
            f" baseline file {path.stat().st_size / 1024:.0f} KiB, median of {repeat})"
        )
        print(f"   Student's t quantiles the comparison computes: {quantiles}, {quantile_us():.0f} µs each")
        print(f"   read_baseline                                {reading:8.1f} ms")
        print(
            f"   replay + atp.core.baseline.compare           {kernel:8.1f} ms  ({kernel_best:.1f})"
            f"  {kernel / tests * 1000:.0f} µs per test"
        )
        print(f"   build_suite_results with the comparison      {built:8.1f} ms  ({built_best:.1f})")
        print(f"   build_suite_results without a baseline       {plain:8.1f} ms")
        print(f"   read_baseline + build_suite_results          {reading + built:8.1f} ms")
        if subprocess.run([atp, "baseline", "--help"], capture_output=True).returncode != 0:
            print("   the whole command: 'atp baseline' is not installed; only the kernel path is timed")
            return
        for output in ("console", "json"):
            argv = [atp, "baseline", "compare", f"--baseline={path}", f"--output={output}", str(run_dir)]
            median, best, code = command_seconds(argv, command_repeat)
            print(
                f"   atp baseline compare --output={output:<8}      {median * 1000:8.1f} ms  ({best * 1000:.1f})"
                f"  exit code {code}, median of {command_repeat}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description="Time statistics and baseline comparisons.")
    parser.add_argument("--tests", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--compare-tests", type=int, default=1000)
    parser.add_argument("--compare-runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=20, help="timings per figure (in-process)")
    parser.add_argument("--command-repeat", type=int, default=5, help="timings per whole command")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {ROOT}")
    suite_statistics_section(args.tests, args.runs, args.repeat)
    baseline_section(
        args.compare_tests, args.compare_runs, max(args.repeat // 4, 3), args.command_repeat, None
    )
    baseline_section(
        args.compare_tests,
        args.compare_runs,
        3,
        max(args.command_repeat // 2, 1),
        Adaptive(max_runs=args.compare_runs),
    )


if __name__ == "__main__":
    main()
