"""CI sharding: a suite's runs split into N deterministic, balanced shares (``--shard=K/N``).

Each fixed run (a test and a run number) is a unit; a test under an adaptive plan is one unit
(its runs are decided one after another, so they stay together). A unit weighs what the test's
runs took on average in the last stored complete run of the suite (the *basis*), or 1 when
there is none; tests the basis does not know weigh the mean of those it does. Units are dealt,
heaviest first, each to the share that weighs least so far (the lowest index on a tie): the
same suite, selection and basis give every shard the same partition, so N jobs that see the
same run directory (restored from a CI cache, say) together make every run exactly once.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import fmean

from atp.core.adaptive import Adaptive
from atp.core.errors import ConfigError
from atp.core.results import MAX_SHARDS, RunStore, stored_runs
from atp.core.suite import Test

_SPEC = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*\Z")


def parse_shard(value: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) as ``(K, N)``; a ConfigError otherwise."""
    match = _SPEC.match(value)
    if match is None:
        raise ConfigError(f"--shard takes K/N, like 2/3 (the second of three shares), not {value!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count or count > MAX_SHARDS:
        raise ConfigError(f"--shard {value}: K must be from 1 to N (and N at most {MAX_SHARDS})")
    return index, count


def durations_basis(root: Path, suite: str) -> tuple[str | None, dict[str, float]]:
    """The newest run of ``suite`` below ``root`` that is a whole run (not a shard, finished,
    neither interrupted nor stopped) and its tests' mean run durations; ``(None, {})`` when
    there is none."""
    basis = next(
        (
            (path, header)
            for path, header in stored_runs(root)
            if header.suite == suite
            and header.shard is None
            and header.finished_at is not None
            and not header.interrupted
            and header.stopped_by is None
        ),
        None,
    )
    if basis is None:
        return None, {}
    times: dict[str, list[float]] = {}
    for run in RunStore.open(basis[0]).read_results():
        times.setdefault(run.test_id, []).append(run.duration_seconds)
    return basis[1].run_id, {test_id: fmean(values) for test_id, values in times.items()}


def partition(
    tests: list[Test],
    count: int,
    runs_of: Callable[[Test], int],
    plan_of: Callable[[Test], Adaptive | None],
    durations: Mapping[str, float],
) -> list[dict[str, list[int] | None]]:
    """``count`` shares of the tests' runs: for each share, the tests it has and their run
    numbers (``None``: every run of the test). A test the suite skips goes to the first share."""
    known = [d for d in durations.values() if d > 0]
    default = fmean(known) if known else 1.0
    units: list[tuple[float, int, str, int | None]] = []
    shares: list[dict[str, list[int] | None]] = [{} for _ in range(count)]
    for order, test in enumerate(tests):
        if test.skip is not None:
            shares[0][test.id] = None
            continue
        weight = durations.get(test.id, default)
        weight = weight if weight > 0 else default
        plan = plan_of(test)
        if plan is not None:
            units.append((weight * plan.max_runs, order, test.id, None))
            continue
        for number in range(1, runs_of(test) + 1):
            units.append((weight, order, test.id, number))
    loads = [(0.0, index) for index in range(count)]  # a heap: the lightest share first
    units.sort(key=lambda unit: (-unit[0], unit[1], unit[3] or 0))
    for weight, _, test_id, run in units:
        load, index = heapq.heappop(loads)
        heapq.heappush(loads, (load + weight, index))
        if run is None:
            shares[index][test_id] = None
        else:
            taken = shares[index].setdefault(test_id, [])
            assert taken is not None
            taken.append(run)
    order_of = {t.id: i for i, t in enumerate(tests)}
    ordered: list[dict[str, list[int] | None]] = []
    for share in shares:  # in the suite's order, run numbers ascending
        ordered.append(
            {
                test_id: sorted(numbers) if numbers is not None else None
                for test_id, numbers in sorted(share.items(), key=lambda item: order_of[item[0]])
            }
        )
    return ordered
