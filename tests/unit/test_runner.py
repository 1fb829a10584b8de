"""The runner against in-process agents (the function adapter)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    FileArtifact,
    Metrics,
    ProgressPayload,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.results import RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from atp.core.trace import EventSink
from tests.conftest import write
from tests.facts import says

SECRET = "sk-live-0123456789"


def answer(request: ATPRequest, status: str = "completed", data: Any = None, **metrics: Any) -> ATPResponse:
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status=status,  # type: ignore[arg-type]
        artifacts=[StructuredArtifact(name="result", data=data or {"answer": 42})],
        metrics=Metrics(**metrics),
    )


def agent_ok(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    sink.event(make_event(request.task_id, 1, ProgressPayload(current_step=2)))
    sink.log(f"using key {SECRET}")
    return answer(request, total_steps=2)


async def agent_slow(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    await anyio.sleep(3600)
    raise AssertionError("unreachable")


def agent_lies(request: ATPRequest, sink: EventSink) -> ATPResponse:
    return answer(ATPRequest(version="1.0", task_id="someone-else", task=request.task))


def agent_crashes(request: ATPRequest, sink: EventSink) -> ATPResponse:
    raise AgentError("agent exited with code 3 without writing a response on stdout")


def agent_unreachable(request: ATPRequest, sink: EventSink) -> ATPResponse:
    raise AdapterError("cannot connect")


def agent_buggy_adapter(request: ATPRequest, sink: EventSink) -> ATPResponse:
    raise KeyError("oops")


def agent_reports_failure(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ErrorPayload(message="rate limited", recoverable=False)))
    response = answer(request, status="failed")
    response.error = "gave up"
    return response


def agent_by_input(request: ATPRequest, sink: EventSink) -> ATPResponse:
    return answer(request, data=request.task.input_data)


def agent_floods(request: ATPRequest, sink: EventSink) -> ATPResponse:
    for i in range(100):
        sink.event(make_event(request.task_id, i, ProgressPayload(current_step=i)))
    return answer(request)


_inflight = {"now": 0, "max": 0}


async def agent_counts_concurrency(request: ATPRequest, sink: EventSink) -> ATPResponse:
    _inflight["now"] += 1
    _inflight["max"] = max(_inflight["max"], _inflight["now"])
    await anyio.sleep(0.02)
    _inflight["now"] -= 1
    return answer(request)


def suite_text(function: str, tests: str, defaults: str = "") -> str:
    return f"""
test_suite: unit
{defaults}
agents:
  - name: agent
    type: function
    function: tests.unit.test_runner:{function}
tests:
{tests}
"""


ONE_TEST = """
  - id: only
    task: {description: "do it", input_data: {x: 1}}
    assertions:
      - type: artifact_exists
        config: {name: result}
      - type: must_use_tools
        config: {tools: [web_search]}
"""


def run(tmp_path: Path, plugins: Plugins, text: str, **options: Any) -> tuple[SuiteResults, Runner]:
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    return anyio.run(runner.run), runner


def test_passing_run_is_stored_and_scored(tmp_path: Path, plugins: Plugins) -> None:
    results, runner = run(tmp_path, plugins, suite_text("agent_ok", ONE_TEST))
    assert results.summary.passed == 1 and results.summary.ok
    test = results.tests[0]
    run_ = test.runs[0]
    assert run_.outcome == "passed" and run_.status == "completed" and run_.score == 100.0
    assert [c.name for c in run_.checks] == ["artifact_exists:result", "must_use_tools"]
    assert run_.trace.events == 2 and run_.trace.tool_calls == {"web_search": 1}
    assert runner.store is not None
    assert [e.event_type for e in runner.store.events(run_)] == ["tool_call", "progress"]
    assert runner.store.log(run_) == f"using key {SECRET}\n"
    # the run directory gives back exactly what the run returned
    assert RunStore.open(runner.store.directory).results() == results


def test_request_carries_metadata_and_constraints(tmp_path: Path, plugins: Plugins) -> None:
    seen: list[ATPRequest] = []

    class Spy:
        @hookimpl
        def atp_run_started(self, test: Any, run_number: int, request: ATPRequest) -> None:
            seen.append(request)

    plugins.register(Spy(), "spy")
    tests = ONE_TEST.replace(
        'task: {description: "do it", input_data: {x: 1}}',
        'task: {description: "do it"}\n    constraints: {max_steps: 7, timeout_seconds: 9}',
    )
    results, _ = run(tmp_path, plugins, suite_text("agent_ok", tests), runs=2)
    assert [r.metadata for r in seen] == [
        {"test_id": "only", "run_number": n, "total_runs": 2, "suite": "unit", "run_id": results.run_id}
        for n in (1, 2)
    ]
    assert seen[0].constraints is not None and seen[0].constraints.max_steps == 7
    assert seen[0].constraints.timeout_seconds == 9
    assert seen[0].task_id != seen[1].task_id


@pytest.mark.slow  # waits out a time limit
def test_timeout_keeps_events_received_before_it(tmp_path: Path, plugins: Plugins) -> None:
    tests = ONE_TEST.replace(
        "input_data: {x: 1}}", "input_data: {x: 1}}\n    constraints: {timeout_seconds: 1}"
    )
    t0 = time.monotonic()
    results, runner = run(tmp_path, plugins, suite_text("agent_slow", tests))
    elapsed = time.monotonic() - t0
    run_ = results.tests[0].runs[0]
    assert 0.9 < elapsed < 5
    assert run_.status == "timeout" and run_.outcome == "failed" and run_.score == 0.0
    says(run_.error, "timed out after 1 s", "stopped")
    assert run_.trace.events == 1 and run_.metrics.tool_calls == 1
    assert runner.store is not None and len(list(runner.store.events(run_))) == 1
    # the trace check still ran on what arrived
    assert {c.name: c.passed for c in run_.checks}["must_use_tools"] is True


def test_agent_timeout_setting_caps_the_test_timeout(tmp_path: Path, plugins: Plugins) -> None:
    text = suite_text("agent_slow", ONE_TEST).replace(
        "    type: function\n", "    type: function\n    timeout: 0.2\n"
    )
    results, _ = run(tmp_path, plugins, text)
    says(results.tests[0].runs[0].error, "timed out after 0.2 s", "stopped")


@pytest.mark.parametrize(
    ("agent", "outcome", "status", "error"),
    [
        (
            "agent_lies",
            "failed",
            "failed",
            "agent answered with task_id 'someone-else', but the request's task_id was",
        ),
        ("agent_crashes", "failed", "failed", "agent exited with code 3"),
        ("agent_unreachable", "error", "failed", "cannot connect"),
        (
            "agent_buggy_adapter",
            "failed",
            "failed",
            "the agent function tests.unit.test_runner:agent_buggy_adapter raised KeyError: 'oops'",
        ),
        ("agent_reports_failure", "failed", "failed", "gave up"),
    ],
)
def test_misbehaving_agents_fail_their_run_with_a_reason(
    tmp_path: Path, plugins: Plugins, agent: str, outcome: str, status: str, error: str
) -> None:
    tests = ONE_TEST + ONE_TEST.replace("id: only", "id: second")
    results, _ = run(tmp_path, plugins, suite_text(agent, tests))
    assert len(results.tests) == 2
    for test in results.tests:
        run_ = test.runs[0]
        assert (run_.outcome, run_.status) == (outcome, status)
        assert run_.error is not None and error in run_.error
        assert test.status == ("error" if outcome == "error" else "failed")
        if outcome == "error":
            assert run_.checks == []
    assert not results.summary.ok


def test_evaluator_that_raises_makes_an_error_run(tmp_path: Path, plugins: Plugins) -> None:
    class Exploding:
        @hookimpl
        def atp_register_evaluators(self, register: Any) -> None:
            from atp.core.evaluator import Evaluator

            class Boom(Evaluator):
                name = "boom"

                async def evaluate(self, ctx: Any, config: Any) -> Any:
                    raise ValueError("bad day")

            register(Boom)

    plugins.register(Exploding(), "exploding")
    tests = ONE_TEST + "      - type: boom\n        name: kaboom\n"
    results, _ = run(tmp_path, plugins, suite_text("agent_ok", tests))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "error"
    boom = run_.checks[-1]
    assert boom.name == "kaboom" and not boom.passed
    says(
        boom.message,
        "evaluator 'boom'",
        "plugin 'exploding'",
        "tests.unit.test_runner",
        "could not check",
        "ValueError: bad day",
    )
    assert boom.details is not None and 'raise ValueError("bad day")' in boom.details["traceback"]


def test_parallel_bounds_concurrent_runs(tmp_path: Path, plugins: Plugins) -> None:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(12))
    _inflight.update(now=0, max=0)
    results, _ = run(tmp_path, plugins, suite_text("agent_counts_concurrency", tests), parallel=3)
    assert results.summary.passed == 12 and _inflight["max"] == 3
    _inflight.update(now=0, max=0)
    run(tmp_path, plugins, suite_text("agent_counts_concurrency", tests))
    assert _inflight["max"] == 1


def test_runs_per_test_and_skip(tmp_path: Path, plugins: Plugins) -> None:
    tests = ONE_TEST + "  - id: later\n    skip: true\n    task: {description: x}\n"
    results, _ = run(tmp_path, plugins, suite_text("agent_ok", tests, "defaults: {runs_per_test: 3}"))
    only, later = results.tests
    assert [r.run_number for r in only.runs] == [1, 2, 3] and only.status == "passed"
    assert later.status == "skipped" and later.skip_reason == "skipped in the suite"
    assert (results.summary.passed, results.summary.skipped, results.summary.runs) == (1, 1, 3)


def test_secrets_are_masked_in_everything_written(tmp_path: Path, plugins: Plugins) -> None:
    _, runner = run(tmp_path, plugins, suite_text("agent_ok", ONE_TEST), masker=Masker([SECRET]))
    assert runner.store is not None
    written = b"".join(p.read_bytes() for p in runner.store.directory.rglob("*") if p.is_file())
    assert SECRET.encode() not in written and b"using key ***" in written


def test_event_flood_fails_the_run(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(tmp_path, plugins, suite_text("agent_floods", ONE_TEST), max_events=50)
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed" and run_.trace.events == 50
    says(run_.error, "flooded", "events", "more than 50")


def test_lifecycle_hooks_in_order(tmp_path: Path, plugins: Plugins) -> None:
    calls: list[str] = []

    class Recorder:
        @hookimpl
        def atp_suite_started(self, header: Any) -> None:
            calls.append(f"suite_started:{len(header.tests)}")

        @hookimpl
        def atp_test_started(self, test: Any) -> None:
            calls.append(f"test_started:{test.id}")

        @hookimpl
        def atp_event(self, test: Any, run_number: int, event: Any) -> None:
            calls.append(f"event:{event.event_type}")

        @hookimpl
        def atp_run_finished(self, result: Any) -> None:
            calls.append(f"run_finished:{result.run_number}")

        @hookimpl
        def atp_test_finished(self, result: Any) -> None:
            calls.append(f"test_finished:{result.id}:{result.status}:{len(result.runs)}")

        @hookimpl
        def atp_suite_finished(self, results: Any) -> None:
            calls.append(f"suite_finished:{results.summary.passed}")

    plugins.register(Recorder(), "recorder")
    run(tmp_path, plugins, suite_text("agent_ok", ONE_TEST), runs=2)
    assert calls == [
        "suite_started:1",
        "test_started:only",
        "event:tool_call",
        "event:progress",
        "run_finished:1",
        "event:tool_call",
        "event:progress",
        "run_finished:2",
        "test_finished:only:passed:2",
        "suite_finished:1",
    ]


def test_interrupt_keeps_finished_runs(tmp_path: Path, plugins: Plugins) -> None:
    class StopAfterFirst:
        @hookimpl
        def atp_run_finished(self, result: Any) -> None:
            raise KeyboardInterrupt

    plugins.register(StopAfterFirst(), "stopper")
    tests = ONE_TEST + ONE_TEST.replace("id: only", "id: second")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, plugins, suite_text("agent_ok", tests))
    (directory,) = (tmp_path / "runs").iterdir()
    results = RunStore.open(directory).results()
    assert results.interrupted
    assert [t.status for t in results.tests] == ["passed", "skipped"]
    says(results.tests[1].skip_reason, "not run", "interrupted")
    header = json.loads((directory / "run.json").read_text())
    assert header["interrupted"] is True and header["finished_at"]


def test_a_plugin_hook_that_raises_does_not_stop_the_suite(
    tmp_path: Path, plugins: Plugins, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        @hookimpl
        def atp_run_finished(self, result: Any) -> None:
            raise RuntimeError("listener bug")

        @hookimpl
        def atp_event(self, test: Any, run_number: int, event: Any) -> None:
            raise ValueError("event bug")

    seen: list[str] = []

    class Listener:  # registered after the broken one: still called
        @hookimpl
        def atp_run_finished(self, result: Any) -> None:
            seen.append(result.test_id)

    plugins.register(Listener(), "listener")
    plugins.register(Broken(), "broken")
    tests = ONE_TEST + ONE_TEST.replace("id: only", "id: second")
    results, _ = run(tmp_path, plugins, suite_text("agent_ok", tests))
    assert results.summary.passed == 2
    assert seen == ["only", "second"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "plugin 'broken' (tests.unit.test_runner) raised in its atp_event hook: ValueError: event bug "
        "(the run goes on)",
        "plugin 'broken' (tests.unit.test_runner) raised in its atp_run_finished hook: RuntimeError: "
        "listener bug (the run goes on)",
    ]
    failures = [(f.plugin, f.where, f.message) for f in results.plugin_failures]
    assert failures == [
        ("broken", "atp_event", "ValueError: event bug"),
        ("broken", "atp_run_finished", "RuntimeError: listener bug"),
    ]
    assert 'raise RuntimeError("listener bug")' in (results.plugin_failures[1].traceback or "")


def agent_in_workspace(request: ATPRequest, sink: EventSink) -> ATPResponse:
    assert request.context is not None and request.context.workspace_path
    workspace = Path(request.context.workspace_path)
    seen = sorted(p.name for p in workspace.iterdir())
    (workspace / "fixed.txt").write_text("done")
    response = answer(request, data={"seen": seen})
    response.artifacts.append(FileArtifact(path="fixed.txt"))
    return response


def test_a_workspace_fixture_is_copied_fresh_for_each_run(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "fixtures" / "project" / "broken.py", "x = 1\n")
    tests = """
  - id: fix
    runs_per_test: 2
    task: {description: "fix it", workspace_fixture: fixtures/project}
    assertions:
      - {type: artifact_exists, config: {path: fixed.txt}, critical: true}
"""
    results, runner = run(tmp_path, plugins, suite_text("agent_in_workspace", tests))
    assert runner.store is not None
    runs = results.tests[0].runs
    assert [r.outcome for r in runs] == ["passed", "passed"]
    for run_ in runs:  # each run saw the fixture alone: the other run's file never reached it
        data = run_.artifacts[0].data  # type: ignore[union-attr]
        assert data == {"seen": ["broken.py"]}
        assert run_.checks[0].details is not None and run_.checks[0].details["critical"] is True
    workspaces = sorted(p.name for p in (runner.store.directory / "workspaces").iterdir())
    assert workspaces == ["fix.1", "fix.2"]
    assert (tmp_path / "fixtures" / "project" / "fixed.txt").exists() is False
