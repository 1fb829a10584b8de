"""The executor seam (atp.core.executor) with a thread-backed executor: runs made through
WorkerSession come back into the run directory as local runs do; faults the worker met are
retried by ATP; a lost worker is a retryable fault, not a lost result."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from atp.core.config import agent_definitions, choose_agent, load_config, resolve_agent
from atp.core.errors import AdapterError
from atp.core.executor import Executor, Job, Shipped
from atp.core.plugins import Plugins
from atp.core.results import RunStore
from atp.core.runner import Runner
from atp.core.suite import load_suite
from atp.core.worker import WorkerSession
from tests.conftest import AGENTS, PYTHON, write


class ThreadExecutor(Executor):
    """A worker in a thread of this process: the seam without a cluster."""

    name = "threads"

    def __init__(self, settings: object = None, lose: set[tuple[str, int]] | None = None) -> None:
        super().__init__(settings)
        self.lose = lose or set()
        self.session: WorkerSession | None = None
        self.calls: list[tuple[str, int]] = []

    async def start(self, job: Job) -> None:
        await super().start(job)
        self.session = await anyio.to_thread.run_sync(WorkerSession, job)

    async def execute(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        assert self.session is not None
        self.calls.append((test_id, run_number))
        if (test_id, run_number) in self.lose:
            self.lose.discard((test_id, run_number))
            raise AdapterError("worker tcp://10.0.0.9:4000 died while making the run")
        return await anyio.to_thread.run_sync(self.session.run, test_id, run_number, task_id)

    async def aclose(self) -> None:
        if self.session is not None:
            await anyio.to_thread.run_sync(self.session.close)


def make_runner(tmp_path: Path, executor: Executor | None, **options: object) -> Runner:
    suite_path = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: seam
        agents:
          - name: agent
            type: cli
            command: {[PYTHON, str(AGENTS / "ledger_agent.py")]!r}
            env: {{LEDGER: {str(tmp_path / "ledger.txt")!r}}}
        tests:
          - id: a
            runs_per_test: 2
            task: {{description: x}}
            assertions:
              - {{type: artifact_exists, config: {{name: result}}}}
          - id: b
            task: {{description: x, input_data: {{outcome: fail}}}}
        """,
    )
    config = load_config(None, cwd=tmp_path)
    plugins = Plugins()
    suite = load_suite(suite_path, plugins.evaluators)
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), "agent"), plugins.adapters)
    job = Job(suite_path=str(suite_path), agent="agent")
    return Runner(
        plugins,
        suite,
        list(suite.tests),
        agent,
        run_root=tmp_path / "runs",
        executor=executor,
        job=job,
        **options,
    )  # type: ignore[arg-type]


def outcomes(results: object) -> dict[str, list[str]]:
    return {t.id: [r.outcome for r in t.runs] for t in results.tests}  # type: ignore[attr-defined]


def test_runs_made_through_an_executor_equal_local_runs(tmp_path: Path) -> None:
    local = anyio.run(make_runner(tmp_path / "local", None).run)
    executor = ThreadExecutor()
    runner = make_runner(tmp_path / "remote", executor)
    remote = anyio.run(runner.run)
    assert outcomes(remote) == outcomes(local) == {"a": ["passed", "passed"], "b": ["failed"]}
    assert remote.summary == local.summary
    assert sorted(executor.calls) == [("a", 1), ("a", 2), ("b", 1)]
    store = RunStore.open(runner.store.directory)  # type: ignore[union-attr]
    (run,) = [r for t in store.results().tests for r in t.runs if t.id == "b"]
    assert run.log_file is None or (store.directory / run.log_file).is_file()
    lines = (store.directory / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["retries"] == [] for line in lines)


def test_a_lost_worker_is_a_recorded_retry_not_a_lost_result(tmp_path: Path) -> None:
    executor = ThreadExecutor(lose={("a", 2)})
    runner = make_runner(tmp_path, executor, retries=2, retry_backoff=0.01)
    results = anyio.run(runner.run)
    assert outcomes(results)["a"] == ["passed", "passed"]
    run = next(r for t in results.tests if t.id == "a" for r in t.runs if r.run_number == 2)
    assert [r.attempt for r in run.retries] == [1] and "died" in run.retries[0].reason
    assert executor.calls.count(("a", 2)) == 2


def test_a_lost_worker_without_retries_is_an_error_run_saying_so(tmp_path: Path) -> None:
    results = anyio.run(make_runner(tmp_path, ThreadExecutor(lose={("b", 1)})).run)
    (run,) = next(t for t in results.tests if t.id == "b").runs
    assert run.outcome == "error" and "died while making the run" in (run.error or "")


def test_a_worker_with_another_suite_refuses_the_job(tmp_path: Path) -> None:
    executor = ThreadExecutor()
    runner = make_runner(tmp_path, executor)
    runner.job = Job(suite_path=str(tmp_path / "suite.yaml"), agent="agent")
    original = runner._job

    def tampered(header: object) -> Job:
        job = original(header)  # type: ignore[arg-type]
        return Job(
            **{**{f: getattr(job, f) for f in job.__struct_fields__}, "tests": {"a": "0" * 16, "b": "0" * 16}}
        )

    runner._job = tampered  # type: ignore[method-assign]
    results = anyio.run(runner.run)
    for test in results.tests:
        for run in test.runs:
            assert run.outcome == "error" and "not the one ATP selected" in (run.error or "")


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_a_worker_tells_the_agent_what_atp_planned(tmp_path: Path) -> None:
    """A resumed run's plan (here 3 runs, where the suite now says 1) is what the worker's
    requests say, not what the worker's copy of the suite would make of it."""
    import json as json_module

    from atp.core.results import PlannedTest

    suite_path = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: plan
        agents:
          - name: agent
            type: cli
            command: {[PYTHON, str(AGENTS / "behave.py"), "echo_request"]!r}
        tests:
          - id: a
            task: {{description: x}}
        """,
    )
    job = Job(
        key="k",
        run_id="r1",
        suite_path=str(suite_path),
        agent="agent",
        plan=[PlannedTest(id="a", name="a", runs=3)],
    )
    session = WorkerSession(job)
    try:
        shipped = session.run("a", 2, "task-2")
    finally:
        session.close()
    result = json_module.loads(shipped.result)
    metadata = result["artifacts"][0]["data"]["request"]["metadata"]
    assert metadata["total_runs"] == 3 and metadata["run_number"] == 2 and metadata["run_id"] == "r1"
    assert result["task_id"] == "task-2"


def test_two_jobs_on_one_worker_never_take_each_others_agents(tmp_path: Path) -> None:
    """Two sessions (two atp test commands sharing a worker) start and stop agents on event
    loops of their own threads: an agent half-made by one is never taken by the other for one
    of its own agent's processes (and killed with it)."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    sessions = []
    for name in ("x", "y"):
        suite = write(
            tmp_path / f"{name}.yaml",
            f"""
            test_suite: {name}
            agents:
              - name: agent
                type: cli
                command: {[PYTHON, str(AGENTS / "ledger_agent.py")]!r}
                env: {{LEDGER: {str(tmp_path / (name + ".ledger"))!r}}}
            tests:
              - id: t
                task: {{description: x, input_data: {{sleep: 0.02}}}}
            """,
        )
        sessions.append(WorkerSession(Job(key=name, run_id=name, suite_path=str(suite), agent="agent")))
    try:
        work = [(sessions[i % 2], i // 2 + 1) for i in range(160)]
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(
                pool.map(lambda item: json.loads(item[0].run("t", item[1], str(uuid.uuid4())).result), work)
            )
    finally:
        for session in sessions:
            session.close()
    failed = [(o["outcome"], o.get("error")) for o in outcomes if o["outcome"] != "passed"]
    assert failed == []


class LosingExecutor(ThreadExecutor):
    """Its cluster is gone for good after ``keep`` runs."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep

    async def execute(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        from atp.core.errors import ExecutorLost

        if self.keep <= 0:
            raise ExecutorLost("the connection to the scheduler at tcp://127.0.0.1:1 is closed")
        self.keep -= 1
        return await super().execute(test_id, run_number, task_id)


def test_a_lost_cluster_stops_the_suite_keeping_what_finished_and_resume_makes_the_rest(
    tmp_path: Path,
) -> None:
    runner = make_runner(tmp_path, LosingExecutor(keep=1))
    results = anyio.run(runner.run)
    assert results.stopped_by == "executor" and results.interrupted
    assert results.summary.runs == 1
    assert all(t.skip_reason is None or "cluster was lost" in t.skip_reason for t in results.tests)
    directory = runner.store.directory  # type: ignore[union-attr]
    again = make_runner(tmp_path, ThreadExecutor(), resume=directory)
    resumed = anyio.run(again.run)
    assert resumed.stopped_by is None and not resumed.interrupted
    assert outcomes(resumed) == {"a": ["passed", "passed"], "b": ["failed"]}


def test_a_worker_refuses_a_bad_evaluator_setting_before_any_run_as_atp_test_does(tmp_path: Path) -> None:
    from atp.core.errors import ConfigError
    from atp.core.prepare import prepare, suite_of

    suite_path = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: seam
        agents:
          - name: agent
            type: cli
            command: {[PYTHON, str(AGENTS / "ledger_agent.py")]!r}
            env: {{LEDGER: {str(tmp_path / "ledger.txt")!r}}}
        tests:
          - id: a
            task: {{description: x}}
            assertions:
              - {{type: contains, config: {{name: result, pattern: x}}}}
        """,
    )
    config_path = write(tmp_path / "atp.config.yaml", "evaluators:\n  contains:\n    no_such_setting: 1\n")
    config = load_config(config_path)
    plugins = Plugins()
    suite = load_suite(suite_path, plugins.evaluators)
    with pytest.raises(ConfigError) as local:  # what atp test does before any run
        prepare(config, plugins, suite_of(config, plugins, suite_path), "agent")
    # A driver that did not check (another machine's config: here, the runner made without it)
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), "agent"), plugins.adapters)
    runner = Runner(
        plugins,
        suite,
        list(suite.tests),
        agent,
        run_root=tmp_path / "runs",
        executor=ThreadExecutor(),
        job=Job(suite_path=str(suite_path), config_path=str(config_path), agent="agent"),
    )
    with pytest.raises(ConfigError) as remote:
        anyio.run(runner.run)
    assert "no_such_setting" in str(local.value) and str(remote.value) == str(local.value)
    assert not (tmp_path / "ledger.txt").exists()  # no run was made
    assert not list((tmp_path / "runs").glob("*/results.jsonl"))
