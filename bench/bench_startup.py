"""Cold start of `atp --help`, against a bare `python -c pass` in the same environment.

.venv/bin/python bench/bench_startup.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], repeat: int) -> list[float]:
    subprocess.run(argv, check=True, capture_output=True)  # warm the OS file cache once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    atp = str(Path(sys.executable).parent / "atp")
    rows = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "atp --help": [atp, "--help"],
        "atp test --help": [atp, "test", "--help"],
        "atp plugins": [atp, "plugins"],
    }
    print(f"{'command':<18} {'median':>9} {'min':>9}   ({args.repeat} runs each)")
    for label, argv in rows.items():
        times = timed(argv, args.repeat)
        print(f"{label:<18} {statistics.median(times) * 1000:8.1f}ms {min(times) * 1000:8.1f}ms")


if __name__ == "__main__":
    main()
