"""Runs on a Dask cluster against runs made here: the whole ``atp test`` command, 1,000 runs of
an in-process agent taking 100 ms (bench/cluster_agent.py, the ``python`` adapter), with
``--parallel=100``:

1. here, in the ``atp test`` process;
2. on a local cluster started by this script: a scheduler and 2 workers of 50 threads each
   (``dask worker --no-nanny``), with ``--executor=dask``.

For each: the wall time of the command (median of ``--repeat``), runs per second, the time per
run beyond the agent's 100 ms (wall / (runs / parallel) - 0.1 s, start-up included), and the CPU
time per run of the ``atp test`` process (the command's CPU for all the runs less its CPU for one
run, divided by the runs less one). On the cluster also the CPU per run of the scheduler and of
the workers (their processes' CPU time over the command).

    .venv/bin/python bench/bench_cluster.py [--runs 1000] [--parallel 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

ATP = Path(sys.executable).with_name("atp")
DASK = Path(sys.executable).with_name("dask")
DELAY = 0.1


def suite(runs: int) -> str:
    return (
        "test_suite: bench-cluster\n"
        "agents:\n"
        f"  - {{name: a, type: python, callable: 'cluster_agent:slow', path: ['{ROOT / 'bench'}']}}\n"
        "tests:\n"
        "  - id: t\n"
        f"    runs_per_test: {runs}\n"
        "    task: {description: answer}\n"
        "    assertions:\n"
        "      - {type: artifact_exists, config: {name: result}}\n"
    )


class Cluster:
    """A scheduler and workers on loopback, each a process of its own."""

    def __init__(self, folder: Path, workers: int, threads: int) -> None:
        env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
        common = ["--host", "127.0.0.1", "--no-dashboard"]
        file = folder / "scheduler.json"
        quiet = {
            "env": env,
            "stdout": subprocess.DEVNULL,
            "stderr": subprocess.DEVNULL,
            "start_new_session": True,
        }
        scheduler = [str(DASK), "scheduler", *common, "--port", "0", "--dashboard-address", "127.0.0.1:0"]
        self.processes = [subprocess.Popen([*scheduler, "--scheduler-file", str(file)], **quiet)]  # type: ignore[call-overload]
        while not file.is_file() or not file.read_text().strip():
            time.sleep(0.05)
        self.address = json.loads(file.read_text())["address"]
        for _ in range(workers):
            worker = [str(DASK), "worker", self.address, *common, "--no-nanny", "--nthreads", str(threads)]
            self.processes.append(subprocess.Popen(worker, **quiet))  # type: ignore[call-overload]
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=60)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time so far of the scheduler, and of all the workers together."""
        import psutil

        times = [sum(psutil.Process(p.pid).cpu_times()[:2]) for p in self.processes]
        return times[0], sum(times[1:])

    def close(self) -> None:
        """The workers first (while their scheduler is there to leave), then the scheduler."""
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"  ({' '.join(process.args[1:3])} did not stop on SIGTERM within 10 s: killed)")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def atp_test(folder: Path, runs: int, parallel: int, extra: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one ``atp test`` command."""
    path = folder / "suite.yaml"
    path.write_text(suite(runs))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(ATP), "test", str(path), f"--parallel={parallel}", *extra],
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
    if done.stderr.strip():
        print(f"  (atp said: {done.stderr.strip()[:300]})")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(
    label: str, folder: Path, args: argparse.Namespace, extra: list[str], cluster: Cluster | None
) -> None:
    atp_test(folder, 10, 10, extra)  # warm: imports, the workers' first job
    ones = [atp_test(folder, 1, 1, extra) for _ in range(args.repeat)]
    one_wall, one = statistics.median(w for w, _ in ones), min(c for _, c in ones)
    walls, cpus, scheduler, workers = [], [], [], []
    for _ in range(args.repeat):
        start = cluster.cpu_seconds() if cluster is not None else (0.0, 0.0)
        wall, cpu = atp_test(folder, args.runs, args.parallel, extra)
        end = cluster.cpu_seconds() if cluster is not None else (0.0, 0.0)
        walls.append(wall)
        cpus.append(cpu)
        scheduler.append(end[0] - start[0])
        workers.append(end[1] - start[1])
    wall = statistics.median(walls)
    waves = args.runs / args.parallel
    startup = one_wall - DELAY
    print(
        f"{label}: {wall:.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), {args.runs / wall:.0f} runs/s\n"
        f"   per wave of {args.parallel} runs beyond the agent's {DELAY * 1000:.0f} ms: {(wall / waves - DELAY) * 1000:.1f} ms"
        f" ({(wall - startup) / waves * 1000 - DELAY * 1000:.1f} ms without the start-up)\n"
        f"   start-up and end (a one-run command less its {DELAY * 1000:.0f} ms): {startup:.2f} s\n"
        f"   CPU of the atp test process per run: {(statistics.median(cpus) - one) / (args.runs - 1) * 1000:.2f} ms"
    )
    if cluster is not None:
        print(
            f"   CPU per run of the scheduler: {statistics.median(scheduler) / args.runs * 1000:.2f} ms,"
            f" of the workers: {statistics.median(workers) / args.runs * 1000:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=50)
    args = parser.parse_args()
    print(
        f"{args.runs} runs of an in-process agent taking {DELAY * 1000:.0f} ms, --parallel={args.parallel}, the whole atp test command"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        measure("here (no executor)", folder, args, [], None)
        cluster = Cluster(folder, args.workers, args.threads)
        try:
            label = f"dask, {args.workers} workers x {args.threads} threads"
            measure(label, folder, args, ["--executor=dask", f"--address={cluster.address}"], cluster)
        finally:
            cluster.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
