"""An agent's ``secrets:`` (and its adapter's ``env``): how they are read and refused, that every
secret value is masked, and that each request's ``context.environment`` carries them
(:mod:`atp.core.agentenv`, :func:`atp.core.config.resolve_agent`, the runner's requests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atp.core.agentenv import (
    MAX_ENTRIES,
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
    EnvironmentProblem,
    read_secrets,
    request_environment,
    secret_sources,
)
from atp.core.attempt import build_request
from atp.core.config import AgentDefinition, agent_definitions, load_config, masker_for, resolve_agent
from atp.core.errors import ConfigError, SuiteError
from atp.core.plan import RunPlan
from atp.core.plugins import Plugins
from atp.core.suite import load_suite
from tests.conftest import write
from tests.facts import says

TOKEN = "tok-1234567890"

SUITE = """
test_suite: s
agents:
  - name: api
    type: http
    endpoint: http://127.0.0.1:9/
    env: {REGION: eu-west}
    secrets: [SERVICE_TOKEN]
  - name: renamed
    type: websocket
    endpoint: ws://127.0.0.1:9/
    secrets: {API_KEY: SERVICE_TOKEN}
  - name: local
    type: cli
    command: [python3, a.py]
    secrets: [SERVICE_TOKEN]
tests:
  - id: a
    task: {description: x}
"""


def agents(tmp_path: Path, plugins: Plugins, text: str = SUITE) -> dict[str, AgentDefinition]:
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    return agent_definitions(load_config(cwd=tmp_path), suite)


def refused(spec: Any, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(EnvironmentProblem) as info:
        read_secrets(spec, environ or {})
    return str(info.value)


def test_secrets_are_names_or_a_mapping_of_the_name_sent_to_the_variable_read() -> None:
    assert secret_sources(None) == {}
    assert secret_sources(["A", "B_2"]) == {"A": "A", "B_2": "B_2"}
    assert secret_sources({"API_KEY": "MY_KEY"}) == {"API_KEY": "MY_KEY"}
    environ = {"A": "value-a", "MY_KEY": "value-k"}
    assert read_secrets(["A"], environ) == {"A": "value-a"}
    assert read_secrets({"API_KEY": "MY_KEY"}, environ) == {"API_KEY": "value-k"}


@pytest.mark.parametrize(
    ("spec", "facts"),
    [
        ("A", ["'secrets' must be a list", "or a mapping"]),
        (["1A"], ["'1A'", "not an environment variable name"]),
        (["A-B"], ["'A-B'", "not an environment variable name"]),
        ([None], ["None", "not an environment variable name"]),
        ({"API_KEY": "MY KEY"}, ["'MY KEY'", "the variable of secret API_KEY"]),
        ({"A": 3}, ["3", "the variable of secret A"]),
        (["A", "A"], ["names A twice"]),
        (
            [f"V{i}" for i in range(MAX_ENTRIES + 1)],
            [f"{MAX_ENTRIES + 1} variables", f"at most {MAX_ENTRIES}"],
        ),
    ],
)
def test_a_secrets_entry_that_names_no_variable_is_refused(spec: Any, facts: list[str]) -> None:
    says(refused(spec), *facts)


def test_a_secret_that_cannot_be_sent_is_refused_naming_the_variable() -> None:
    says(refused(["SERVICE_TOKEN"]), "secret SERVICE_TOKEN", "SERVICE_TOKEN is not set")
    says(refused({"API_KEY": "SRC"}), "secret API_KEY (read from SRC)", "SRC is not set")
    says(refused(["T"], {"T": "abc"}), "secret T", "3 characters", "at least 4")  # (too short to mask)
    says(refused(["T"], {"T": "abcd\0e"}), "secret T", "NUL")
    says(
        refused(["T"], {"T": "x" * (MAX_VALUE_BYTES + 1)}),
        f"{MAX_VALUE_BYTES + 1} bytes",
        str(MAX_VALUE_BYTES),
    )
    says(refused(["T"], {"T": "abcd\udcff"}), "secret T", "not valid UTF-8")


def test_the_whole_environment_is_bounded_and_a_name_comes_from_one_place() -> None:
    assert request_environment({"A": "1"}, {"B": "secret"}) == {"A": "1", "B": "secret"}
    with pytest.raises(EnvironmentProblem, match="B is named in both 'env' and 'secrets'"):
        request_environment({"B": "1"}, {"B": "secret"})
    many = {f"V{i}": "x" for i in range(MAX_ENTRIES)}
    with pytest.raises(EnvironmentProblem, match=f"{MAX_ENTRIES + 1} variables"):
        request_environment(many, {"B": "secret"})
    big = {f"V{i}": "x" * MAX_VALUE_BYTES for i in range(MAX_TOTAL_BYTES // MAX_VALUE_BYTES + 1)}
    with pytest.raises(EnvironmentProblem, match=f"at most {MAX_TOTAL_BYTES}"):
        request_environment(big, {})


def test_a_resolved_agent_sends_its_env_and_secrets_and_masks_the_secrets(
    tmp_path: Path, plugins: Plugins
) -> None:
    found = agents(tmp_path, plugins)
    environ = {"SERVICE_TOKEN": TOKEN}
    api = resolve_agent(found["api"], plugins.adapters, environ)
    assert api.environment == {"REGION": "eu-west", "SERVICE_TOKEN": TOKEN}
    renamed = resolve_agent(found["renamed"], plugins.adapters, environ)
    assert renamed.environment == {"API_KEY": TOKEN}
    local = resolve_agent(found["local"], plugins.adapters, environ)
    assert local.environment == {"SERVICE_TOKEN": TOKEN}  # (a cli agent's env is its process's only)
    for agent in (api, renamed, local):
        masker = masker_for(load_config(cwd=tmp_path), agent)
        assert masker.text(f"the token {TOKEN}.") == "the token ***."
    # (a plain value is not a secret)
    assert masker_for(load_config(cwd=tmp_path), api).text("eu-west") == "eu-west"


def test_a_secret_not_set_is_a_located_error_naming_the_agent_and_the_variable(
    tmp_path: Path, plugins: Plugins
) -> None:
    found = agents(tmp_path, plugins)
    with pytest.raises(SuiteError) as info:
        resolve_agent(found["renamed"], plugins.adapters, {})
    says(
        str(info.value),
        "suite.yaml",
        "agents[1].secrets",
        "agent 'renamed'",
        "API_KEY",
        "SERVICE_TOKEN",
        "not set",
    )
    assert info.value.line == 11  # (the line of `secrets:`)


def test_a_config_agents_secrets_are_located_in_the_config(tmp_path: Path, plugins: Plugins) -> None:
    write(
        tmp_path / "atp.config.yaml",
        "agents:\n  api:\n    type: http\n    endpoint: http://127.0.0.1:9/\n    secrets: [SERVICE_TOKEN]\n",
    )
    definition = agent_definitions(load_config(cwd=tmp_path))["api"]
    with pytest.raises(SuiteError) as info:
        resolve_agent(definition, plugins.adapters, {})
    says(str(info.value), "atp.config.yaml", "agents.api.secrets", "agent 'api'", "SERVICE_TOKEN")
    # Without a file (an agent defined in code): the agent's name leads the message.
    bare = AgentDefinition("api", dict(definition.raw), None, (), tmp_path)
    with pytest.raises(ConfigError) as bare_info:
        resolve_agent(bare, plugins.adapters, {})
    assert str(bare_info.value).startswith("agent 'api': secret SERVICE_TOKEN")


def test_a_name_in_both_env_and_secrets_is_a_located_error(tmp_path: Path, plugins: Plugins) -> None:
    text = SUITE.replace("env: {REGION: eu-west}", "env: {SERVICE_TOKEN: plain}")
    with pytest.raises(SuiteError) as info:
        resolve_agent(agents(tmp_path, plugins, text)["api"], plugins.adapters, {"SERVICE_TOKEN": TOKEN})
    says(str(info.value), "agents[0].secrets", "SERVICE_TOKEN is named in both 'env' and 'secrets'")


def test_a_network_agents_env_names_must_be_variable_names(tmp_path: Path, plugins: Plugins) -> None:
    text = SUITE.replace("env: {REGION: eu-west}", "env: {BAD-NAME: x}")
    with pytest.raises(SuiteError) as info:
        resolve_agent(agents(tmp_path, plugins, text)["api"], plugins.adapters, {"SERVICE_TOKEN": TOKEN})
    says(str(info.value), "agents[0]", "'BAD-NAME'", "not an environment variable name")


def test_each_request_carries_the_environment_in_its_context(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(write(tmp_path / "suite.yaml", SUITE), plugins.evaluators)
    [test] = suite.tests
    plan = RunPlan(1)
    request = build_request(test, 1, plan, ("s", "r"), None, None, {"A": "1", "T": TOKEN})
    assert request.context is not None
    assert request.context.environment == {"A": "1", "T": TOKEN}
    assert request.context.workspace_path is None
    with_workspace = build_request(test, 1, plan, ("s", "r"), tmp_path, None, {"A": "1"})
    assert with_workspace.context is not None and with_workspace.context.workspace_path == str(tmp_path)
    assert with_workspace.context.environment == {"A": "1"}
    assert build_request(test, 1, plan, ("s", "r"), None, None, {}).context is None


seen_by_agent: list[dict[str, str]] = []


def agent_reads_environment(request: Any, sink: Any) -> Any:
    from atp.core.protocol import ATPResponse, Metrics

    seen_by_agent.append(dict(request.context.environment))
    return ATPResponse(
        version="1.0", task_id=request.task_id, status="completed", artifacts=[], metrics=Metrics()
    )


def test_hooks_get_the_request_with_its_secrets_masked(
    tmp_path: Path, plugins: Plugins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent gets its secret; a plugin's ``atp_run_started`` sees the request masked (a
    tracing or webhook plugin records what it is given)."""
    import anyio

    from atp.core.hookspecs import hookimpl
    from atp.core.runner import Runner

    seen_by_hook: list[Any] = []

    class Watcher:
        @hookimpl
        def atp_run_started(self, test: Any, run_number: int, request: Any) -> None:
            seen_by_hook.append(request.context.environment)

    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    text = (
        "test_suite: s\nagents:\n  - name: fn\n    type: function\n"
        "    function: tests.unit.test_agent_secrets:agent_reads_environment\n"
        "    secrets: [SERVICE_TOKEN]\ntests:\n  - id: a\n    task: {description: x}\n"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["fn"], plugins.adapters)
    name = plugins.register(Watcher(), name="watcher")
    seen_by_agent.clear()
    try:
        runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs")
        results = anyio.run(runner.run)
    finally:
        plugins.unregister(name)
    assert results.tests[0].status == "passed"
    assert seen_by_agent == [{"SERVICE_TOKEN": TOKEN}]
    assert seen_by_hook == [{"SERVICE_TOKEN": "***"}]
