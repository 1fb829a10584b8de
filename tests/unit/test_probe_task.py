"""atp.core.validation.ProbeTask: what `atp validate`'s probe asks, a suite's test as `atp test`
sends it, or the generic greeting."""

from __future__ import annotations

from pathlib import Path

import pytest

from atp.core.errors import ConfigError
from atp.core.plugins import Plugins
from atp.core.suite import Suite, load_suite
from atp.core.validation import PROBE_DESCRIPTION, ProbeTask
from tests.conftest import write

SUITE = """
test_suite: probes
tests:
  - {id: later, skip: true, task: {description: never}}
  - id: main
    task: {description: translate, input_data: {text: bonjour}, workspace_fixture: fixture}
    constraints: {max_steps: 7, timeout_seconds: 120}
  - {id: short, task: {description: quick}, constraints: {timeout_seconds: 5}}
"""


@pytest.fixture
def suite(tmp_path: Path, plugins: Plugins) -> Suite:
    write(tmp_path / "fixture" / "notes.txt", "the fixture's file\n")
    return load_suite(write(tmp_path / "suite.yaml", SUITE), plugins.evaluators)


def test_the_first_test_not_skipped_probes_as_atp_test_sends_it(suite: Suite) -> None:
    probe = ProbeTask.of_suite(suite)
    assert probe.what == "the task of test 'main' of suite 'probes'"
    with probe.workspace() as workspace:
        assert workspace is not None and (workspace / "notes.txt").read_text() == "the fixture's file\n"
        request = probe.request(30.0, workspace)
        assert request.context is not None and request.context.workspace_path == str(workspace)
    assert not workspace.exists()  # removed after the probe
    assert request.task.description == "translate" and request.task.input_data == {"text": "bonjour"}
    assert request.constraints.max_steps == 7
    assert request.constraints.timeout_seconds == 30  # no more than the probe waits
    assert request.metadata is not None and request.metadata["test_id"] == "main"
    assert request.metadata["run_id"] == ProbeTask.RUN_ID


def test_test_picks_another_and_its_own_shorter_limit_stays(suite: Suite) -> None:
    probe = ProbeTask.of_suite(suite, "short")
    with probe.workspace() as workspace:
        assert workspace is None
    assert probe.request(30.0).constraints.timeout_seconds == 5
    with pytest.raises(ConfigError, match="has no test 'nope'.*later, main, short"):
        ProbeTask.of_suite(suite, "nope")


def test_without_a_suite_the_generic_greeting() -> None:
    probe = ProbeTask()
    assert probe.what.startswith("a generic task")
    request = probe.request(2.5)
    assert request.task.description == PROBE_DESCRIPTION and request.constraints.timeout_seconds == 3


TOOLS_SUITE = """
test_suite: probes
tests:
  - id: searches
    task: {description: search}
    tools: [{name: web_search, output: {results: [Acme]}}]
"""


def test_the_tests_tool_server_is_started_around_the_probe(tmp_path: Path, plugins: Plugins) -> None:
    """As around a run of `atp test`: the request carries the tools' address, the calls the
    server answers are counted in the probe's sink (apart from the agent's events), and the
    server is closed after the probe. Without the plugins the request goes as it is."""
    import anyio
    import httpx

    from atp.core.secrets import Masker
    from atp.core.validation import ProbeSink

    suite = load_suite(write(tmp_path / "suite.yaml", TOOLS_SUITE), plugins.evaluators)
    probe = ProbeTask.of_suite(suite)
    request = probe.request(30.0)
    sink = ProbeSink(request.task_id, Masker())

    async def probing() -> tuple[str, dict[str, object]]:
        async with probe.served(request, sink) as bare:
            assert bare is request  # no plugins: nothing started
        probe.plugins = plugins
        async with probe.served(request, sink) as sent:
            assert sent.task_id == request.task_id and sent.context is not None
            endpoint = sent.context.tools_endpoint
            assert endpoint is not None
            async with httpx.AsyncClient() as client:
                reply = await client.post(
                    f"{endpoint}/web_search", json={"task_id": sent.task_id, "input": {}}
                )
        return endpoint, reply.json()

    endpoint, answer = anyio.run(probing)
    assert answer["status"] == "success" and answer["output"] == {"results": ["Acme"]}
    assert sink.recorded == {"web_search": 1} and sink.events_seen == 0
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{endpoint}/web_search", json={"task_id": request.task_id, "input": {}})
