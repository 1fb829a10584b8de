from __future__ import annotations

from pathlib import Path

import pytest

from atp.core.config import (
    ConfigFileError,
    agent_definitions,
    choose_agent,
    interpolate,
    load_config,
    masker_for,
    resolve_agent,
)
from atp.core.errors import ConfigError, SuiteError
from atp.core.plugins import Plugins
from atp.core.suite import load_suite
from tests.conftest import write

CONFIG = """
version: "1.0"
defaults: {timeout_seconds: 30, runs_per_test: 3, parallel_workers: 4}
agents:
  shared:
    type: cli
    command: "python3 agent.py --token ${AGENT_TOKEN}"
    env: {HOME_DIR: "${HOME_DIR:-/home/none}", PRICE: "$$5"}
evaluators:
  llm_judge: {model: some-model, temperature: 0}
reporting: {default: json, verbose: true}
secrets:
  anthropic_api_key: ${ANTHROPIC_API_KEY}
  missing: ${NOT_SET_ANYWHERE}
"""

SUITE = """
test_suite: s
agents:
  - name: shared
  - name: local
    type: cli
    command: [python3, a.py]
    timeout: 5
tests:
  - id: a
    task: {description: x}
"""


def test_config_is_found_in_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", CONFIG)
    config = load_config(cwd=tmp_path)
    assert config.path == tmp_path / "atp.config.yaml"
    assert config.spec.defaults.parallel_workers == 4
    assert config.spec.reporting.default == "json"
    assert config.evaluator_settings("llm_judge") == {"model": "some-model", "temperature": 0}
    assert config.run_dir == tmp_path / ".atp/runs"


def test_no_config_file_is_an_empty_config(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path)
    assert config.path is None and config.spec.agents == {}


def test_config_errors_are_located(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "defaults:\n  parallel_workers: 0\n")
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert (info.value.path, info.value.line) == ("defaults.parallel_workers", 2)
    write(path, "report: {}\n")
    with pytest.raises(ConfigFileError, match="unknown field 'report'"):
        load_config(path)


def test_secrets_are_interpolated_and_masked(tmp_path: Path) -> None:
    path = write(tmp_path / "atp.config.yaml", CONFIG)
    from atp.core.config import Config
    from atp.core.yamlfile import YamlDocument

    spec = load_config(path).spec
    config = Config(spec, YamlDocument.load(path), environ={"ANTHROPIC_API_KEY": "sk-secret-123"})
    assert config.secrets == {"anthropic_api_key": "sk-secret-123"}
    assert masker_for(config).text("key=sk-secret-123") == "key=***"


def test_interpolation() -> None:
    env = {"A": "1", "B": "two"}
    data = {"x": "${A}-${B}", "y": ["${C:-dflt}", "$$A", 3], "z": "plain"}
    used: set[str] = set()
    out = interpolate(data, env, lambda v, w: f"<{v}>", (), used)
    assert out == {"x": "1-two", "y": ["dflt", "$A", 3], "z": "plain"}
    assert used == {"A", "B", "C"}


def test_agents_from_config_and_suite(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "atp.config.yaml", CONFIG)
    config = load_config(cwd=tmp_path)
    suite = load_suite(write(tmp_path / "suites" / "s.yaml", SUITE), plugins.evaluators)
    found = agent_definitions(config, suite)
    assert sorted(found) == ["local", "shared"]
    assert found["shared"].base_dir == tmp_path
    assert found["local"].base_dir == tmp_path / "suites"

    env = {"AGENT_TOKEN": "tok-abcdef", "HOME_DIR": "/h"}
    shared = resolve_agent(found["shared"], plugins.adapters, env)
    assert shared.type == "cli" and shared.timeout is None
    assert shared.settings.command == "python3 agent.py --token tok-abcdef"
    assert shared.settings.env == {"HOME_DIR": "/h", "PRICE": "$5"}
    assert shared.secrets == ["tok-abcdef"]  # AGENT_TOKEN looks secret, HOME_DIR does not
    local = resolve_agent(found["local"], plugins.adapters, env)
    assert local.timeout == 5 and local.settings.command == ["python3", "a.py"]


def test_missing_variable_is_a_located_error(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "atp.config.yaml", CONFIG)
    config = load_config(cwd=tmp_path)
    with pytest.raises(ConfigError) as info:
        resolve_agent(agent_definitions(config)["shared"], plugins.adapters, {})
    assert "AGENT_TOKEN is not set" in str(info.value)
    assert isinstance(info.value, SuiteError) and info.value.line == 6


def test_adapter_settings_are_validated_with_location(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(
        write(tmp_path / "s.yaml", "test_suite: s\nagents:\n  - name: a\n    type: cli\n    comand: [x]\n"
              "tests:\n  - id: t\n    task: {description: x}\n"),
        plugins.evaluators,
    )
    definition = agent_definitions(load_config(cwd=tmp_path), suite)["a"]
    with pytest.raises(SuiteError) as info:
        resolve_agent(definition, plugins.adapters, {})
    assert (info.value.path, info.value.line) == ("agents[0].comand", 5)


def test_unknown_type_and_missing_type(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(
        write(tmp_path / "s.yaml", "test_suite: s\nagents:\n  - {name: a, type: grpc}\n  - {name: b, command: x}\n"
              "tests:\n  - id: t\n    task: {description: x}\n"),
        plugins.evaluators,
    )
    found = agent_definitions(load_config(cwd=tmp_path), suite)
    with pytest.raises(SuiteError, match="unknown agent type 'grpc'"):
        resolve_agent(found["a"], plugins.adapters, {})
    with pytest.raises(SuiteError, match="has no 'type'"):
        resolve_agent(found["b"], plugins.adapters, {})


def test_suite_reference_to_unknown_config_agent(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(write(tmp_path / "s.yaml", SUITE), plugins.evaluators)
    with pytest.raises(ConfigError, match="agent 'shared' is not defined in the config"):
        agent_definitions(load_config(cwd=tmp_path), suite)


def test_choose_agent(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "atp.config.yaml", CONFIG)
    found = agent_definitions(load_config(cwd=tmp_path))
    assert choose_agent(found, None).name == "shared"
    with pytest.raises(ConfigError, match="no agent named 'x' \\(defined: shared\\)"):
        choose_agent(found, "x")
    with pytest.raises(ConfigError, match="no agent is defined"):
        choose_agent({}, None)
    two = dict(found, other=found["shared"])
    with pytest.raises(ConfigError, match="choose an agent with --agent: other, shared"):
        choose_agent(two, None)


def test_evaluator_settings_are_interpolated_and_their_secrets_masked(tmp_path: Path) -> None:
    from atp.core.config import Config
    from atp.core.yamlfile import YamlDocument

    path = write(tmp_path / "atp.config.yaml", """
        evaluators:
          judge: {model: "${JUDGE_MODEL:-small}", api_key: "${JUDGE_API_KEY}"}
          other: {token: "${MISSING_TOKEN}"}
        """)
    document = YamlDocument.load(path)
    config = Config(load_config(path).spec, document, environ={"JUDGE_API_KEY": "sk-judge-999"})
    assert config.evaluator_settings("judge") == {"model": "small", "api_key": "sk-judge-999"}
    assert config.evaluator_settings("absent") == {}
    with pytest.raises(SuiteError) as info:
        config.evaluator_settings("other")
    assert "MISSING_TOKEN is not set" in info.value.reason and info.value.line == 3
    assert masker_for(config).text("key sk-judge-999") == "key ***"
