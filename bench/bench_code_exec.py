"""What a code-execution check costs beyond the tool it runs: a ``custom_command`` running
``true``, a ``pytest`` check of a two-test solution and a ``lint`` check of one file, each
against the same tool run bare in a folder (median of ``--repeat``), on this machine's isolation
(``unshare`` namespaces where they work).

    .venv/bin/python bench/bench_code_exec.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import common  # noqa: F401 - the repository on sys.path

from atp.core.testing import evaluate, response
from atp.evaluators.code_exec import CustomCommand, Lint, Pytest
from atp.evaluators.code_exec.command import isolation

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\ndef test_zero():\n    assert add(0, 0) == 0\n"


def median_ms(action, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def bare(argv: list[str], folder: Path) -> None:
    subprocess.run(argv, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def check(evaluator: type, config: dict) -> None:  # type: ignore[type-arg]
    resp = response(files={"solution.py": SOLUTION})
    (result,) = anyio.run(evaluate, evaluator, config, resp)
    assert result.passed, result.message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"isolation here: {anyio.run(isolation)}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "solution.py").write_text(SOLUTION)
        (folder / "test_solution.py").write_text(TESTS)
        py = sys.executable
        rows = [
            ("custom_command true", ["true"], CustomCommand, {"command": ["true"]}),
            (
                "pytest, 2 tests",
                [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                Pytest,
                {"files": {"test_solution.py": TESTS}},
            ),
            ("lint, 1 file", [py, "-m", "ruff", "check", "--no-cache", "solution.py"], Lint, {}),
        ]
        for label, argv, evaluator, config in rows:
            alone = median_ms(lambda argv=argv: bare(argv, folder), args.repeat)
            checked = median_ms(lambda e=evaluator, c=config: check(e, c), args.repeat)
            print(
                f"{label}: the tool alone {alone:.0f} ms, the check {checked:.0f} ms; ATP's part {checked - alone:.0f} ms"
            )


if __name__ == "__main__":
    main()
