"""What a container run costs ATP beyond the container itself, on a real Docker engine.

The agent is tests/agents/container_agent.py (task ``whoami``) in the busybox image the
container tests build, run by the host's Python mounted read-only, with the limits of the tests.

1. ``docker run --rm -i`` of that container with a request on stdin, ``--runs`` times one after
   another: the floor (the engine creating, starting and removing a container, and the agent).
2. ``atp test`` of a suite of ``--runs`` tests on the ``container`` adapter, one at a time: each
   run's wall time as ATP records it (``duration_seconds``: the container's ``docker run``, the
   exchange, the removal through the engine's API), and the whole command.
3. The same suite of 20 tests with ``--parallel=4``.

    .venv/bin/python bench/bench_container.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

from tests.containers import agents_folder, busybox_image, python, python_mounts

IMAGE = "atp-test/busybox:1"


def docker_run_argv() -> list[str]:
    argv = [
        "docker",
        "run",
        "--rm",
        "-i",
        "--network",
        "none",
        "--cap-drop",
        "ALL",
        "--user",
        "65534:65534",
        "--memory",
        str(96 * 1024 * 1024),
        "--memory-swap",
        str(96 * 1024 * 1024),
        "--log-driver",
        "none",
    ]
    for entry in [*python_mounts(), f"{agents_folder()}:/agents"]:
        host, _, inside = entry.partition(":")
        argv += ["--mount", f"type=bind,source={host},target={inside or host},readonly"]
    return [*argv, IMAGE, python(), "/agents/container_agent.py"]


def floor(runs: int) -> list[float]:
    request = json.dumps({"version": "1.0", "task_id": "t", "task": {"description": "whoami"}}) + "\n"
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(docker_run_argv(), input=request.encode(), capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def suite(folder: Path, tests: int) -> Path:
    mounts = [*python_mounts(), f"{agents_folder()}:/agents"]
    body = "".join(f"  - id: t{i}\n    task: {{description: whoami}}\n" for i in range(tests))
    path = folder / "suite.yaml"
    path.write_text(
        "test_suite: bench\nagents:\n  - name: boxed\n    type: container\n    image: atp-test/busybox:1\n"
        f"    command: [{python()!r}, /agents/container_agent.py]\n    readonly_mounts: {json.dumps(mounts)}\n"
        "    resources: {memory: 96Mi}\n    pull: never\n"
        f"tests:\n{body}"
    )
    return path


def atp(folder: Path, tests: int, parallel: int) -> tuple[float, list[float]]:
    path = suite(folder, tests)
    start = time.perf_counter()
    subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "atp"),
            "test",
            f"--suite={path}",
            f"--parallel={parallel}",
            "--output=json:r.json",
        ],
        cwd=folder,
        capture_output=True,
        check=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    whole = time.perf_counter() - start
    data = json.loads((folder / "r.json").read_text())
    return whole, [run["duration_seconds"] for test in data["tests"] for run in test["runs"]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    import docker

    busybox_image(docker.from_env())
    floor(2)  # warm the engine and the page cache
    base = floor(args.runs)
    with tempfile.TemporaryDirectory() as folder:
        whole, runs = atp(Path(folder), args.runs, 1)
        parallel_whole, _ = atp(Path(folder), 20, 4)
    print(
        f"docker run --rm -i, {args.runs} runs one after another: median {statistics.median(base) * 1000:.0f} ms "
        f"(min {min(base) * 1000:.0f}, max {max(base) * 1000:.0f})"
    )
    print(
        f"atp test, {args.runs} container runs one after another: median run {statistics.median(runs) * 1000:.0f} ms "
        f"(min {min(runs) * 1000:.0f}, max {max(runs) * 1000:.0f}); whole command {whole:.2f} s"
    )
    print(
        f"ATP's own time per container run beyond docker run: "
        f"{(statistics.median(runs) - statistics.median(base)) * 1000:.0f} ms (median against median)"
    )
    print(
        f"atp test, 20 container runs, --parallel=4: whole command {parallel_whole:.2f} s "
        f"({parallel_whole / 20 * 1000:.0f} ms per run)"
    )


if __name__ == "__main__":
    sys.exit(main())
