"""Plugins that misbehave make one run an error (or stop ATP with a plugin error), named, while
the rest of the suite goes on; the end-to-end versions (installed packages) are in
tests/e2e/test_buggy_plugins.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import anyio
import msgspec
import pytest

from atp.core.adapter import Adapter
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import PluginFailed
from atp.core.evaluator import EvalContext, Evaluator, EvaluatorResultError, check, skipped
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, ATPResponse, Metrics, StructuredArtifact
from atp.core.results import Check, RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from atp.core.testing import response, run_evaluator
from atp.core.trace import EventSink
from tests.conftest import write
from tests.facts import says

RETURNS: dict[str, Any] = {
    "truth": True,
    "none": None,
    "single": check("x", True, "ok"),
    "dicts": [{"name": "x", "passed": True}],
    "score": [Check(name="x", passed=True, score=2.0, message="ok")],
    "nan": [Check(name="x", passed=True, score=float("nan"), message="ok")],
    "passed": [Check(name="x", passed="yes", score=1.0, message="ok")],  # type: ignore[arg-type]
    "unsaid": [Check(name="x", passed=False, score=0.0, message="ok", skipped=" ")],
    "skipscore": [Check(name="x", passed=False, score=0.9, message="ok", skipped="no key")],
    "skippass": [Check(name="x", passed=True, score=0.0, message="ok", skipped="no key")],
}


SKIP_RULE = (
    ": a skipped check needs a reason, passed=False and score 0 (atp.core.evaluator.skipped makes one)"
)


class ReturnsConfig(msgspec.Struct):
    what: str


class Returns(Evaluator):
    name = "returns"
    Config = ReturnsConfig

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        return RETURNS[config.what]  # type: ignore[no-any-return]


class Blocking(Evaluator):
    name = "blocking"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        time.sleep(0.6)  # the mistake being detected: a blocking call on the event loop
        return [check("blocking", True, "slept")]


class Sync(Evaluator):
    name = "sync"

    def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:  # type: ignore[override]
        name = threading.current_thread().name
        return [check("sync", threading.current_thread() is not threading.main_thread(), name)]


class Holding(Evaluator):
    """Holds something across runs: released once, on the runs' event loop, when they are over."""

    name = "holding"
    closed: ClassVar[list[str]] = []

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        return (
            [skipped("holding", "nothing to hold today")]
            if ctx.test.id == "skips"
            else [check("holding", True, "held")]
        )

    async def aclose(self) -> None:
        Holding.closed.append(threading.current_thread().name)
        if ctx_fail[0]:
            raise RuntimeError("could not let go")


ctx_fail = [False]


class MisbehavingSettings(msgspec.Struct):
    mode: str


class Misbehaving(Adapter):
    type = "misbehaving"
    Settings = MisbehavingSettings

    async def start(self) -> None:
        if self.settings.mode == "start":
            raise RuntimeError("cannot find my socket")

    async def execute(self, request: ATPRequest, sink: EventSink) -> Any:
        mode = self.settings.mode
        if mode == "raise":
            raise KeyError("oops")
        if mode == "none":
            return None
        if mode == "dict":
            return {"status": "completed"}
        return ATPResponse(
            version="1.0",
            task_id=request.task_id,
            status="completed" if "fail" not in str(request.task.input_data) else "failed",
            artifacts=[StructuredArtifact(name="result", data={"a": 1})],
            metrics=Metrics(),
        )


class Bundle:
    @hookimpl
    def atp_register_evaluators(self, register: Any) -> None:
        for cls in (Returns, Blocking, Sync, Holding):
            register(cls)

    @hookimpl
    def atp_register_adapters(self, register: Any) -> None:
        register(Misbehaving)


@pytest.fixture
def loaded(plugins: Plugins) -> Plugins:
    plugins.register(Bundle(), "bundle")
    return plugins


def suite(mode: str, tests: str) -> str:
    return f"""
test_suite: failures
agents:
  - {{name: agent, type: misbehaving, mode: {mode}}}
tests:
{tests}
"""


def a_test(test_id: str, assertion: str = "", data: str = "{}") -> str:
    text = f"""
  - id: {test_id}
    task: {{description: "do it", input_data: {data}}}
"""
    if assertion:
        text += f"    assertions:\n      - {assertion}\n"
    return text


def run(tmp_path: Path, plugins: Plugins, text: str, **options: Any) -> tuple[SuiteResults, Runner]:
    loaded_suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(
        agent_definitions(load_config(cwd=tmp_path), loaded_suite)["agent"], plugins.adapters
    )
    runner = Runner(plugins, loaded_suite, loaded_suite.tests, agent, run_root=tmp_path / "runs", **options)
    return anyio.run(runner.run), runner


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("truth", "returned bool True, not a list of Check"),
        ("none", "returned None, not a list of Check"),
        (
            "single",
            "returned Check Check(name='x', passed=True, score=1.0, message='ok', details=None, skipped=None) (a single Check: return [check]), not a list of Check",
        ),
        ("dicts", "returned a list whose item 0 is dict {'name': 'x', 'passed': True}, not a Check"),
        ("score", "returned a Check (item 0, 'x') whose 'score' is 2.0, not within 0-1"),
        ("nan", "returned a Check (item 0, 'x') whose 'score' is nan, not within 0-1"),
        ("passed", "returned a Check (item 0, 'x') whose 'passed' is str 'yes', not a bool"),
        ("unsaid", "returned a Check (item 0, 'x') whose 'skipped' is str ' '" + SKIP_RULE),
        ("skipscore", "returned a Check (item 0, 'x') whose 'skipped' is str 'no key'" + SKIP_RULE),
        ("skippass", "returned a Check (item 0, 'x') whose 'skipped' is str 'no key'" + SKIP_RULE),
    ],
)
def test_an_evaluator_returning_something_else_makes_its_run_an_error(
    tmp_path: Path, loaded: Plugins, what: str, said: str
) -> None:
    tests = a_test("bad", f"{{type: returns, config: {{what: {what}}}}}") + a_test("good")
    results, _ = run(tmp_path, loaded, suite("ok", tests))
    bad, good = results.tests
    assert (bad.status, good.status) == ("error", "passed")
    (item,) = bad.runs[0].checks
    says(item.message, "evaluator 'returns'", "plugin 'bundle'", "tests.unit.test_plugin_failures", said)
    assert not item.passed and item.score == 0.0


@pytest.mark.parametrize("what", sorted(RETURNS))
def test_run_evaluator_applies_the_same_checks(what: str) -> None:
    with pytest.raises(EvaluatorResultError, match="evaluator 'returns' returned"):
        run_evaluator(Returns, {"what": what}, response())


def test_a_plain_def_evaluate_runs_in_a_worker_thread(tmp_path: Path, loaded: Plugins) -> None:
    results, _ = run(tmp_path, loaded, suite("ok", a_test("t", "{type: sync}")))
    (item,) = results.tests[0].runs[0].checks
    assert item.passed, item.message
    assert run_evaluator(Sync, {}, response())[0].passed


@pytest.mark.slow  # waits out a time limit
def test_a_blocking_async_evaluator_is_named_in_a_warning_once(
    tmp_path: Path, loaded: Plugins, caplog: pytest.LogCaptureFixture
) -> None:
    results, _ = run(
        tmp_path, loaded, suite("ok", a_test("a", "{type: blocking}") + a_test("b", "{type: blocking}"))
    )
    assert results.summary.passed == 2
    warnings = [r.getMessage() for r in caplog.records if "held the event loop" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "evaluator 'blocking' of plugin 'bundle' (tests.unit.test_plugin_failures) held the event loop for 0.6"
    )
    assert "anyio.to_thread.run_sync" in warnings[0]


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("none", "returned None, not an ATPResponse"),
        ("dict", "returned dict {'status': 'completed'}, not an ATPResponse"),
        ("raise", "raised KeyError: 'oops'"),
    ],
)
def test_an_adapter_misbehaving_makes_each_run_an_error_naming_it(
    tmp_path: Path, loaded: Plugins, mode: str, said: str
) -> None:
    results, _ = run(tmp_path, loaded, suite(mode, a_test("one") + a_test("two")))
    assert [t.status for t in results.tests] == ["error", "error"]
    run_ = results.tests[0].runs[0]
    says(run_.error, "adapter 'misbehaving'", "plugin 'bundle'", "tests.unit.test_plugin_failures", said)
    assert (run_.traceback is not None) == (mode == "raise")
    if mode == "raise":
        assert 'raise KeyError("oops")' in (run_.traceback or "")


def test_an_adapter_failing_to_start_is_a_plugin_failure(tmp_path: Path, loaded: Plugins) -> None:
    with pytest.raises(PluginFailed) as caught:
        run(tmp_path, loaded, suite("start", a_test("one")))
    says(
        str(caught.value),
        "adapter 'misbehaving'",
        "plugin 'bundle'",
        "tests.unit.test_plugin_failures",
        "failed to start",
        "agent 'agent'",
        "RuntimeError: cannot find my socket",
    )
    assert list((tmp_path / "runs").iterdir()) == []  # nothing ran: no run directory is left


def test_fail_fast_stops_at_the_first_failing_run(tmp_path: Path, loaded: Plugins) -> None:
    tests = a_test("first") + a_test("second", data="{x: fail}") + a_test("third") + a_test("fourth")
    results, runner = run(tmp_path, loaded, suite("ok", tests), fail_fast=True)
    assert [t.status for t in results.tests] == ["passed", "failed", "skipped", "skipped"]
    says(results.tests[2].skip_reason, "not run", "--fail-fast")
    assert results.stopped_by == "fail-fast" and not results.interrupted
    assert not results.summary.ok
    assert runner.store is not None
    assert RunStore.open(runner.store.directory).results() == results


@pytest.mark.parametrize("fails", [False, True])
def test_evaluators_are_closed_once_when_the_runs_are_over(
    tmp_path: Path, loaded: Plugins, fails: bool
) -> None:
    Holding.closed = []
    ctx_fail[0] = fails
    try:
        tests = (
            a_test("one", "{type: holding}")
            + a_test("two", "{type: holding}")
            + a_test("skips", "{type: holding}")
        )
        results, runner = run(tmp_path, loaded, suite("ok", tests))
    finally:
        ctx_fail[0] = False
    assert Holding.closed == [threading.main_thread().name]
    assert [t.status for t in results.tests] == ["passed", "passed", "skipped"]
    says(
        results.tests[2].skip_reason,
        "not checked",
        "every check was skipped",
        "holding: nothing to hold today",
    )
    skipped_run = results.tests[2].runs[0]
    assert (
        skipped_run.skipped_checks[0].skipped == "nothing to hold today" and skipped_run.failed_checks == []
    )
    assert results.summary.skipped_checks == 1
    failures = [f for f in runner.plugin_failures if "aclose" in f.where]
    assert [(f.where, f.message) for f in failures] == (
        [("evaluator 'holding' aclose", "RuntimeError: could not let go")] if fails else []
    )


def test_a_critical_check_that_was_skipped_leaves_its_test_unchecked(tmp_path: Path, loaded: Plugins) -> None:
    tests = a_test("skips", "{type: holding, critical: true}").replace(
        "    assertions:\n", "    assertions:\n      - {type: sync}\n"
    )
    results, _ = run(tmp_path, loaded, suite("ok", tests))
    (test,) = results.tests
    assert test.status == "skipped" and results.summary.passed == 0
    says(test.skip_reason, "not checked", "critical check holding", "skipped", "nothing to hold today")
