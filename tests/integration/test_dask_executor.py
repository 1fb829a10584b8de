"""The dask executor (atp-executors[dask]) against a real local cluster: a scheduler and two
workers started here as processes (`dask scheduler`, `dask worker --no-nanny`), driven by the
real `atp test --executor=dask`. Runs made on the cluster equal runs made here; a worker killed
mid-suite costs a recorded retry, never a result; a missing or unreachable scheduler is a usage
error saying so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, PYTHON, write

pytest.importorskip("distributed")

DASK = str(Path(sys.executable).parent / "dask")
CLUSTER_ENV = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}


class Cluster:
    """A scheduler and workers on 127.0.0.1, each a process (group) of its own."""

    def __init__(
        self, folder: Path, workers: int = 2, threads: int = 4, worker_env: dict[str, str] | None = None
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.file = folder / "scheduler.json"
        self.tmp = folder / "tmp"
        """The workers' temporary folder (where their sessions keep their runs' folders)."""
        self.tmp.mkdir(exist_ok=True)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        # Every socket on loopback: the dashboard listens on every interface without
        # --dashboard-address, even with --no-dashboard (docs/cluster.md).
        loopback = ["--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
        scheduler = [DASK, "scheduler", *loopback, "--port", "0"]
        self.scheduler = self._start("scheduler", [*scheduler, "--scheduler-file", str(self.file)])
        deadline = time.monotonic() + 30
        while not self.file.is_file() or not self.file.read_text().strip():
            assert self.scheduler.poll() is None, self.log("scheduler")
            assert time.monotonic() < deadline, "the scheduler did not start in 30 s"
            time.sleep(0.05)
        self.address: str = json.loads(self.file.read_text())["address"]
        worker = [DASK, "worker", self.address, *loopback, "--no-nanny", "--nthreads", str(threads)]
        for index in range(workers):
            self.workers.append(self._start(f"worker-{index}", [*worker, "--name", f"w{index}"], worker_env))
        self.wait_for(workers)

    def _start(
        self, name: str, command: list[str], env_more: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps it
        env = {**CLUSTER_ENV, "TMPDIR": str(self.tmp), **(env_more or {})}
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")[-3000:]

    def busiest(self) -> tuple[subprocess.Popen[bytes], str]:
        """The worker process with the most tasks in hand, and its address."""
        from distributed import Client

        with Client(self.address, timeout=10) as client:
            pids = client.run(os.getpid)
            address = max(client.processing().items(), key=lambda item: len(item[1]))[0]
        (process,) = [p for p in self.workers if p.pid == pids[address]]
        return process, address

    def wait_for(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=10) as client:
            client.wait_for_workers(count, timeout=30)

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)

    def close(self) -> None:
        for process in reversed(self.processes):
            self.kill(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.close()


def atp(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ledger_suite(folder: Path, tests: str, defaults: str = "") -> Path:
    command = [PYTHON, str(AGENTS / "ledger_agent.py")]
    return write(
        folder / "suite.yaml",
        f"test_suite: cluster\n{defaults}agents:\n  - name: agent\n    type: cli\n    command: {command!r}\n"
        f"    env: {{LEDGER: {str(folder / 'ledger.txt')!r}}}\ntests:\n{tests}",
    )


def results_lines(directory: Path) -> list[str]:
    path = directory / "results.jsonl"
    return path.read_text().splitlines() if path.is_file() else []


def only_run_directory(folder: Path) -> Path:
    (directory,) = [d for d in (folder / ".atp" / "runs").iterdir() if d.is_dir()]
    return directory


def comparable(report: dict) -> dict:  # type: ignore[type-arg]
    """What must not depend on where the runs were made."""
    tests = {
        t["id"]: {
            "status": t["status"],
            "runs": sorted((r["run_number"], r["outcome"], r["status"], r["score"]) for r in t["runs"]),
            "checks": sorted(
                (r["run_number"], c.get("name"), c.get("passed"))
                for r in t["runs"]
                for c in r.get("checks", [])
            ),
        }
        for t in report["tests"]
    }
    summary = {k: v for k, v in report["summary"].items() if "seconds" not in k and "duration" not in k}
    return {"tests": tests, "summary": summary}


MIXED_TESTS = "".join(
    f"  - id: t{i}\n    runs_per_test: 2\n    task: {{description: x, input_data: {{sleep: 0.05, events: {i % 3}"
    + (", outcome: fail" if i == 5 else "")
    + "}}\n    assertions:\n      - {type: artifact_exists, config: {name: result}}\n"
    for i in range(8)
)


def test_runs_on_the_cluster_equal_runs_made_here(cluster: Cluster, tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "remote"
    for folder in (local, remote):
        ledger_suite(folder, MIXED_TESTS)
    here = atp("test", "--suite=suite.yaml", "--parallel=4", "--output=json:out.json", cwd=local)
    there = atp(
        "test", "--suite=suite.yaml", "--parallel=4", "--executor=dask", f"--address={cluster.address}",
        "--output=json:out.json", cwd=remote,
    )  # fmt: skip
    assert here.returncode == there.returncode == 1, there.stdout + there.stderr  # t5 fails
    assert there.stderr == here.stderr == "json results written to out.json\n", there.stderr  # no warning
    mine, theirs = (json.loads((f / "out.json").read_text()) for f in (local, remote))
    assert comparable(theirs) == comparable(mine)
    assert comparable(theirs)["tests"]["t5"]["status"] == "failed"
    assert sum(len(t["runs"]) for t in theirs["tests"]) == 16
    made = Counter((remote / "ledger.txt").read_text().splitlines())
    assert made == Counter(f"t{i} {n}" for i in range(8) for n in (1, 2))  # each run once
    directory = only_run_directory(remote)
    runs = [json.loads(line) for line in results_lines(directory)]
    assert len(runs) == 16 and all(r["retries"] == [] for r in runs)
    for run in runs:
        expected = int(run["test_id"][1:]) % 3
        if expected:
            assert run["events_file"], run
            events = (directory / run["events_file"]).read_text().splitlines()
            assert len(events) == expected
        else:
            assert run["events_file"] is None, run
    assert not list(cluster.tmp.glob("atp-worker-*"))  # the workers closed the job


def test_a_worker_killed_mid_suite_costs_a_recorded_retry_not_a_result(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "cluster")
    try:
        tests = "".join(
            f"  - id: k{i}\n    task: {{description: x, input_data: {{sleep: 0.5}}}}\n" for i in range(20)
        )
        ledger_suite(tmp_path, tests, defaults="defaults:\n  retries: 2\n")
        write(tmp_path / "atp.config.yaml", "defaults:\n  retry_backoff_seconds: 0.05\n")
        env = {**os.environ, "NO_COLOR": "1"}
        command = [
            ATP,
            "test",
            "--suite=suite.yaml",
            "--parallel=4",
            "--executor=dask",
            f"--address={cluster.address}",
        ]
        process = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 30
        directory: Path | None = None
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "the suite ended before the kill"
            if directory is None and (tmp_path / ".atp" / "runs").is_dir():
                found = [d for d in (tmp_path / ".atp" / "runs").iterdir() if d.is_dir()]
                directory = found[0] if found else None
            if directory is not None and len(results_lines(directory)) >= 3:
                break
            time.sleep(0.02)
        before = results_lines(directory)
        victim, victim_address = cluster.busiest()
        cluster.kill(victim)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, out + err
        assert "Traceback" not in err, err
        after = results_lines(directory)
        assert after[: len(before)] == before  # nothing written before is lost or changed
        runs = [json.loads(line) for line in after]
        assert Counter(r["test_id"] for r in runs) == Counter(f"k{i}" for i in range(20))  # each once
        assert all(r["outcome"] == "passed" for r in runs), [r for r in runs if r["outcome"] != "passed"]
        retried = [r for r in runs if r["retries"]]
        assert retried, "no run was on the killed worker"
        for run in retried:
            reason = run["retries"][0]["reason"]
            assert f"worker {victim_address} died while making run 1 of test" in reason, reason
            assert "KilledWorker" in reason, reason
        # every run was made once, but those on the dead worker: again after it died
        made = Counter((tmp_path / "ledger.txt").read_text().splitlines())
        assert set(made) == {f"k{i} 1" for i in range(20)}
        assert {line for line, count in made.items() if count > 1} <= {f"{r['test_id']} 1" for r in retried}
    finally:
        cluster.close()


def test_the_executor_without_an_address_is_a_usage_error(tmp_path: Path) -> None:
    ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n")
    result = atp("test", "--suite=suite.yaml", "--executor=dask", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "atp: error: the dask executor needs the scheduler's address: --address=tcp://HOST:8786"
        in result.stderr
    )
    result = atp("test", "--suite=suite.yaml", "--executor=dask", "--address=scheduler", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "atp: error: the dask executor's address 'scheduler' is not a scheduler address like tcp://"
        in result.stderr
    )
    assert not (tmp_path / "ledger.txt").exists()


def test_an_address_where_nothing_listens_is_an_error_naming_it(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n")
    write(tmp_path / "atp.config.yaml", "executors:\n  dask:\n    connect_timeout: 1\n")
    started = time.monotonic()
    result = atp(
        "test", "--suite=suite.yaml", "--executor=dask", f"--address=tcp://127.0.0.1:{port}", cwd=tmp_path
    )
    assert time.monotonic() - started < 15
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        f"atp: error: cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} within 1 s: nothing answered"
        in result.stderr
    )
    assert not (tmp_path / "ledger.txt").exists()
    assert not list(tmp_path.glob(".atp/runs/*"))  # nothing ran: no run directory is left


def agents_of(ledger: Path) -> list[int]:
    """The processes of the ledger agents that write to ``ledger`` (by their environment)."""
    found = []
    marker = f"LEDGER={ledger}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_stops_the_runs_on_the_workers_and_closes_the_job(cluster: Cluster, tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: s{i}\n    task: {{description: x, input_data: {{sleep: 60}}}}\n" for i in range(4)
    )
    ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"
    command = [
        ATP,
        "test",
        "--suite=suite.yaml",
        "--parallel=4",
        "--executor=dask",
        f"--address={cluster.address}",
    ]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_until(lambda: ledger.is_file() and len(ledger.read_text().splitlines()) == 4, 30), (
        process.poll()
    )
    assert len(agents_of(ledger)) == 4
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, out + err
    assert time.monotonic() - started < 10
    assert "Traceback" not in err, err
    assert agents_of(ledger) == []  # stopped on the workers, not left to finish their minute
    assert not list(cluster.tmp.glob("atp-worker-*"))


def test_a_run_atp_gives_up_on_is_stopped_on_its_worker(cluster: Cluster, tmp_path: Path) -> None:
    """ATP's own time limit for a run on the cluster (a worker that does not answer) cancels
    the run: its task is cancelled and the worker stops its agent, while the job goes on."""
    import anyio

    from atp.core.executor import Job
    from atp.executors.dask import DaskExecutor

    tests = "  - id: slow\n    task: {description: x, input_data: {sleep: 60}}\n  - id: quick\n    task: {description: x}\n"
    suite = ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"

    async def main() -> tuple[bool, str]:
        executor = DaskExecutor({"address": cluster.address})
        await executor.start(Job(key="giving-up", run_id="giving-up", suite_path=str(suite), agent="agent"))
        try:
            with anyio.move_on_after(30) as limit:
                async with anyio.create_task_group() as group:
                    group.start_soon(executor.execute, "slow", 1, "task-slow")

                    def working() -> bool:
                        return (
                            ledger.is_file()
                            and ledger.read_text() == "slow 1\n"
                            and len(agents_of(ledger)) == 1
                        )

                    await anyio.to_thread.run_sync(wait_until, working, 20)
                    group.cancel_scope.cancel()  # as ATP's time limit does
            assert not limit.cancelled_caught
            stopped = await anyio.to_thread.run_sync(wait_until, lambda: agents_of(ledger) == [], 10)
            quick = await executor.execute("quick", 1, "task-quick")  # the job goes on
            return stopped, quick.where
        finally:
            await executor.aclose()

    stopped, where = anyio.run(main)
    assert stopped, "the cancelled run's agent still runs on its worker"
    assert where.startswith("tcp://127.0.0.1:")
    assert (tmp_path / "ledger.txt").read_text().splitlines() == ["slow 1", "quick 1"]


def test_a_worker_without_atps_executor_stops_the_command_before_any_run(tmp_path: Path) -> None:
    blocker = write(
        tmp_path / "block" / "sitecustomize.py",
        """
        import sys

        class Block:  # this worker has no atp-executors
            def find_spec(self, name, path=None, target=None):
                if name.startswith("atp.executors"):
                    raise ModuleNotFoundError(f"No module named {name!r}")

        sys.meta_path.insert(0, Block())
        """,
    )
    cluster = Cluster(
        tmp_path / "cluster", workers=1, threads=1, worker_env={"PYTHONPATH": str(blocker.parent)}
    )
    try:
        ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n")
        result = atp(
            "test", "--suite=suite.yaml", "--executor=dask", f"--address={cluster.address}", cwd=tmp_path
        )
    finally:
        cluster.close()
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "cannot load ATP's executor: ModuleNotFoundError(\"No module named 'atp.executors" in result.stderr
    ), result.stderr
    assert "install ATP on every worker as here, with the plugins the suite uses" in result.stderr
    assert "docs/cluster.md" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # the error alone: closing says nothing more
    assert not (tmp_path / "ledger.txt").exists()
    assert not list(tmp_path.glob(".atp/runs/*"))


def test_a_worker_whose_atp_was_killed_still_stops_when_told(tmp_path: Path) -> None:
    """The job of an ``atp test`` killed with SIGKILL is never closed by it: the worker closes it
    when the worker itself is stopped (its agents stopped, nothing left to keep it alive)."""
    cluster = Cluster(tmp_path / "cluster", workers=1, threads=2)
    try:
        tests = "".join(
            f"  - id: s{i}\n    task: {{description: x, input_data: {{sleep: 60}}}}\n" for i in range(2)
        )
        ledger_suite(tmp_path, tests)
        ledger = tmp_path / "ledger.txt"
        command = [
            ATP,
            "test",
            "--suite=suite.yaml",
            "--parallel=2",
            "--executor=dask",
            f"--address={cluster.address}",
        ]
        process = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        assert wait_until(lambda: ledger.is_file() and len(ledger.read_text().splitlines()) == 2, 30), (
            process.poll()
        )
        process.kill()
        process.wait()
        (worker,) = cluster.workers
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=15)  # not kept alive by the job's threads
        assert wait_until(lambda: agents_of(ledger) == [], 10)
    finally:
        cluster.close()
