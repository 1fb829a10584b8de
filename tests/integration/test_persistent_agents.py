"""Persistent stdio agents (``persistent: true``): real agent processes serving one request after
another, through the real Runner."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.plugins import Plugins
from atp.core.results import RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from tests.conftest import AGENTS, PYTHON, write
from tests.integration.test_cli_adapter import alive

AGENT = [PYTHON, str(AGENTS / "persistent.py")]


@pytest.fixture
def pids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder where each agent process leaves a file named after its pid."""
    folder = tmp_path / "pids"
    folder.mkdir()
    monkeypatch.setenv("AGENT_PIDS_DIR", str(folder))
    return folder


def started(folder: Path) -> list[int]:
    return sorted(int(path.name) for path in folder.iterdir())


def suite_tests(descriptions: list[str], timeout: float | None = None) -> str:
    lines = []
    for index, description in enumerate(descriptions):
        lines += [f"  - id: t{index:02d}", f"    task: {{description: {description}}}"]
        if timeout is not None:
            lines.append(f"    constraints: {{timeout_seconds: {timeout:g}}}")
        lines += ["    assertions:", "      - {type: artifact_exists, config: {name: answer}}"]
    return "\n".join(lines) + "\n"


def run_suite(
    tmp_path: Path,
    plugins: Plugins,
    descriptions: list[str],
    *,
    settings: str = "    persistent: true\n",
    timeout: float | None = None,
    name: str = "suite",
    **options: Any,
) -> tuple[SuiteResults, RunStore]:
    text = (
        f"test_suite: persistent\nagents:\n  - name: agent\n    type: cli\n    command: {AGENT!r}\n"
        f"    grace_seconds: 1\n{settings}tests:\n{suite_tests(descriptions, timeout)}"
    )
    suite = load_suite(write(tmp_path / f"{name}.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    results = anyio.run(runner.run)
    assert runner.store is not None
    return results, runner.store


def runs(results: SuiteResults) -> list[Any]:
    return [run for test in results.tests for run in test.runs]


def all_gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(pid) for pid in pids)


def comparable(results: SuiteResults) -> list[tuple[Any, ...]]:
    """What a run's result says, without what differs from one run to the next."""
    return [
        (
            test.id,
            run.outcome,
            run.status,
            run.score,
            [{k: v for k, v in a.data.items() if k != "pid"} for a in run.artifacts],
            [(c.name, c.passed) for c in run.checks],
            run.trace.by_type,
        )
        for test in results.tests
        for run in test.runs
    ]


def test_fifty_tests_four_at_once_use_at_most_four_processes_and_match_one_process_per_run(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    descriptions = [f"task-{i}" for i in range(50)]
    pooled, _ = run_suite(tmp_path, plugins, descriptions, parallel=4)
    processes = started(pids)
    assert 1 <= len(processes) <= 4, processes
    assert pooled.summary.passed == 50, [r.error for r in runs(pooled) if r.error]
    assert all(r.warnings == [] for r in runs(pooled)), [r.warnings for r in runs(pooled) if r.warnings]
    assert all_gone(processes)  # the end of the suite stops every pooled process

    for path in pids.iterdir():
        path.unlink()
    one_each, _ = run_suite(tmp_path, plugins, descriptions, settings="", parallel=4, name="per-run")
    assert len(started(pids)) == 50
    assert comparable(pooled) == comparable(one_each)
    # every run's events are its own: two progress events each, in either mode
    assert all(r.trace.by_type == {"progress": 2} for r in runs(pooled))


def test_an_agent_that_crashes_on_one_request_fails_that_run_and_a_new_process_serves_the_next(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    results, _ = run_suite(tmp_path, plugins, ["a", "b", "crash", "c", "d"])
    outcomes = [(r.outcome, r.error) for r in runs(results)]
    assert [o for o, _ in outcomes] == ["passed", "passed", "failed", "passed", "passed"]
    error = outcomes[2][1]
    assert error.startswith("agent exited with code 3 after 2 runs without writing a response on stdout"), (
        error
    )
    assert "about to crash" in error
    first, second = started(pids)
    assert all_gone([first, second])


def test_a_timeout_kills_only_the_process_of_that_run(tmp_path: Path, plugins: Plugins, pids: Path) -> None:
    descriptions = ["a", "b", "hang", "c", "d", "e", "f", "g"]
    began = time.monotonic()
    results, _ = run_suite(tmp_path, plugins, descriptions, timeout=1, parallel=2)
    assert time.monotonic() - began < 8
    by_test = {test.id: test.runs[0] for test in results.tests}
    assert by_test["t02"].status == "timeout" and by_test["t02"].outcome == "failed"
    assert [r.outcome for test_id, r in sorted(by_test.items()) if test_id != "t02"] == ["passed"] * 7
    # the other process served runs before and after the one that hung, which was stopped
    served = {test_id: run.artifacts[0].data["pid"] for test_id, run in by_test.items() if test_id != "t02"}
    survivor = served["t07"]
    (hung,) = set(started(pids)) - {survivor}
    assert set(served.values()) <= {survivor, hung} and survivor in {served["t00"], served["t01"]}
    assert all(served[f"t0{i}"] == survivor for i in range(3, 8))
    assert by_test["t02"].duration_seconds < 3
    assert all_gone(started(pids))


def test_a_process_answering_another_task_id_fails_that_run_and_is_replaced(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    results, _ = run_suite(tmp_path, plugins, ["a", "wrong_id", "b"])
    outcomes = [r.outcome for r in runs(results)]
    assert outcomes == ["passed", "failed", "passed"]
    assert "agent answered with task_id 'not-" in runs(results)[1].error
    assert len(started(pids)) == 2


def test_max_runs_per_process_recycles_processes(tmp_path: Path, plugins: Plugins, pids: Path) -> None:
    settings = "    persistent: true\n    max_runs_per_process: 3\n"
    results, _ = run_suite(tmp_path, plugins, [f"x{i}" for i in range(10)], settings=settings)
    assert results.summary.passed == 10
    assert len(started(pids)) == 4  # 3 + 3 + 3 + 1
    assert all_gone(started(pids))


def test_an_agent_that_answers_once_and_exits_still_works_with_a_warning(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    results, _ = run_suite(tmp_path, plugins, ["exit_after", "exit_after", "exit_after"])
    assert results.summary.passed == 3
    assert len(started(pids)) == 3
    warnings = [w for r in runs(results) for w in r.warnings]
    # whether the process had exited when the next run came, or exited when it got the request:
    # the request goes to a new process, with a warning
    assert len(warnings) == 2, warnings
    assert all(
        "exited with code 0 while it waited for its next request (after 1 run)" in w
        or "exited with code 0 after 1 run without a word about this request; ATP sent it to a new process"
        in w
        for w in warnings
    ), warnings


def test_events_after_a_response_are_not_the_next_runs_and_stdout_noise_is_log(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    results, store = run_suite(tmp_path, plugins, ["late_event", "a", "noise"])
    first, second, third = runs(results)
    assert [first.outcome, second.outcome, third.outcome] == ["passed", "passed", "passed"]
    # The late event carries the first run's task_id: it is the first run's when ATP read it
    # before that run ended, else the second run drops it, saying so; never the second run's.
    assert second.trace.by_type == {"progress": 2}
    dropped = any("has task_id" in w and "such events are dropped" in w for w in second.warnings)
    assert first.trace.by_type == {"progress": 2 if dropped else 3}, (first.trace, second.warnings)
    assert third.warnings == ["1 stdout lines that are not JSON were kept as the agent's log"]
    log = (store.directory / third.log_file).read_text()
    assert "[stdout] debug: thinking" in log


def test_a_process_that_ignores_the_end_of_stdin_is_stopped_at_the_end_of_the_suite(
    tmp_path: Path, plugins: Plugins, pids: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_IGNORE_EOF", "1")
    began = time.monotonic()
    results, _ = run_suite(tmp_path, plugins, ["a", "b"], parallel=1)
    assert results.summary.passed == 2
    (pid,) = started(pids)
    assert all_gone([pid], within=0.5)  # already stopped when the suite returned
    assert time.monotonic() - began < 6  # grace_seconds: 1, then SIGTERM


def test_without_the_flag_the_agent_serves_one_request_per_process(
    tmp_path: Path, plugins: Plugins, pids: Path
) -> None:
    results, _ = run_suite(tmp_path, plugins, ["a", "b", "c"], settings="")
    assert results.summary.passed == 3
    assert len(started(pids)) == 3


def test_max_runs_per_process_needs_persistent(tmp_path: Path, plugins: Plugins) -> None:
    from atp.core.errors import ConfigError

    with pytest.raises(ConfigError, match="'max_runs_per_process' applies to persistent agents only"):
        run_suite(tmp_path, plugins, ["a"], settings="    max_runs_per_process: 2\n")


def test_the_processes_are_the_agents_and_no_other(tmp_path: Path, plugins: Plugins, pids: Path) -> None:
    """Nothing is left running, and the ledger of the run directory is gone (a clean end)."""
    results, store = run_suite(tmp_path, plugins, ["a", "b", "c", "d"], parallel=2)
    assert results.summary.passed == 4
    assert all_gone(started(pids))
    assert not (store.directory / "processes.jsonl").exists()
    assert os.listdir(pids)
