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
from tests.facts import says

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
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    says(str(info.value), "c.yaml", ":1", "'report'")


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
    says(str(info.value), "atp.config.yaml", ":6", "agents.shared.command", "AGENT_TOKEN")
    assert isinstance(info.value, SuiteError) and info.value.line == 6


def test_adapter_settings_are_validated_with_location(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(
        write(
            tmp_path / "s.yaml",
            "test_suite: s\nagents:\n  - name: a\n    type: cli\n    comand: [x]\n"
            "tests:\n  - id: t\n    task: {description: x}\n",
        ),
        plugins.evaluators,
    )
    definition = agent_definitions(load_config(cwd=tmp_path), suite)["a"]
    with pytest.raises(SuiteError) as info:
        resolve_agent(definition, plugins.adapters, {})
    assert (info.value.path, info.value.line) == ("agents[0].comand", 5)


def test_unknown_type_and_missing_type(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(
        write(
            tmp_path / "s.yaml",
            "test_suite: s\nagents:\n  - {name: a, type: smtp}\n  - {name: b, command: x}\n"
            "tests:\n  - id: t\n    task: {description: x}\n",
        ),
        plugins.evaluators,
    )
    found = agent_definitions(load_config(cwd=tmp_path), suite)
    with pytest.raises(SuiteError) as info:
        resolve_agent(found["a"], plugins.adapters, {})
    says(str(info.value), "s.yaml", ":3", "agents[0].type", "'smtp'")
    with pytest.raises(SuiteError) as info:
        resolve_agent(found["b"], plugins.adapters, {})
    says(str(info.value), "s.yaml", ":4", "agents[1].type", "'type'")


def test_suite_reference_to_unknown_config_agent(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(write(tmp_path / "s.yaml", SUITE), plugins.evaluators)
    with pytest.raises(ConfigError) as info:
        agent_definitions(load_config(cwd=tmp_path), suite)
    says(str(info.value), "s.yaml", ":3", "agents[0].name", "agent 'shared'", "config")


def test_choose_agent(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "atp.config.yaml", CONFIG)
    found = agent_definitions(load_config(cwd=tmp_path))
    assert choose_agent(found, None).name == "shared"
    with pytest.raises(ConfigError) as info:
        choose_agent(found, "x")
    says(str(info.value), "'x'", "shared")
    with pytest.raises(ConfigError) as info:
        choose_agent({}, None)
    says(str(info.value), "no agent", "'agents'", "atp.config.yaml")
    two = dict(found, other=found["shared"])
    with pytest.raises(ConfigError) as info:
        choose_agent(two, None)
    says(str(info.value), "--agent", "other, shared")


def test_evaluator_settings_are_interpolated_and_their_secrets_masked(tmp_path: Path) -> None:
    from atp.core.config import Config
    from atp.core.yamlfile import YamlDocument

    path = write(
        tmp_path / "atp.config.yaml",
        """
        evaluators:
          judge: {model: "${JUDGE_MODEL:-small}", api_key: "${JUDGE_API_KEY}"}
          other: {token: "${MISSING_TOKEN}"}
        """,
    )
    document = YamlDocument.load(path)
    config = Config(load_config(path).spec, document, environ={"JUDGE_API_KEY": "sk-judge-999"})
    assert config.evaluator_settings("judge") == {"model": "small", "api_key": "sk-judge-999"}
    assert config.evaluator_settings("absent") == {}
    with pytest.raises(SuiteError) as info:
        config.evaluator_settings("other")
    says(info.value.reason, "MISSING_TOKEN")
    assert info.value.line == 3
    assert masker_for(config).text("key sk-judge-999") == "key ***"


# --- [tool.atp] in pyproject.toml -----------------------------------------------------------

PYPROJECT = """
[project]
name = "my-agent"

[tool.atp]
version = "1.0"
plugins = ["my_team.checks"]

[tool.atp.defaults]
runs_per_test = 2
parallel_workers = 3

[tool.atp.agents.research]
type = "cli"
command = ["python3", "agent.py"]

[tool.atp.reporting]
default = ["console", "json"]
"""


def test_the_tool_atp_table_of_pyproject_is_the_config(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT)
    config = load_config(cwd=tmp_path)
    assert config.path == tmp_path / "pyproject.toml" and config.base_dir == tmp_path
    assert config.spec.defaults.runs_per_test == 2 and config.spec.defaults.parallel_workers == 3
    assert config.spec.reporting.default == ["console", "json"]
    assert config.spec.plugins == ["my_team.checks"] and config.warnings == []
    agent = resolve_agent(agent_definitions(config)["research"], plugins.adapters, {})
    assert agent.settings.command == ["python3", "agent.py"] and agent.definition.base_dir == tmp_path


def test_a_config_file_wins_over_tool_atp_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT)
    write(tmp_path / "atp.config.yaml", "defaults: {runs_per_test: 5}\n")
    config = load_config(cwd=tmp_path)
    assert config.path == tmp_path / "atp.config.yaml" and config.spec.defaults.runs_per_test == 5
    assert len(config.warnings) == 1
    says(config.warnings[0], "pyproject.toml", "[tool.atp]", "ignored", "atp.config.yaml")


def test_config_option_beats_both(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT)
    write(tmp_path / "atp.config.yaml", "defaults: {runs_per_test: 5}\n")
    other = write(tmp_path / "ci" / "atp.yaml", "defaults: {runs_per_test: 7}\n")
    config = load_config(other, cwd=tmp_path)
    assert config.spec.defaults.runs_per_test == 7 and config.warnings == []
    config = load_config(tmp_path / "pyproject.toml")  # --config pyproject.toml reads [tool.atp]
    assert config.spec.defaults.runs_per_test == 2


def test_a_pyproject_without_tool_atp_is_no_config(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.other]\natp = 1\n')
    config = load_config(cwd=tmp_path)
    assert config.path is None and config.spec == load_config(cwd=tmp_path / "none").spec
    write(tmp_path / "pyproject.toml", "[project]\nname = [\n")  # not ATP's business
    assert load_config(cwd=tmp_path).path is None
    write(tmp_path / "atp.config.yaml", "version: '1.0'\n")
    assert load_config(cwd=tmp_path).warnings == []
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(ConfigFileError) as info:
        load_config(tmp_path / "pyproject.toml")
    says(str(info.value), "pyproject.toml", "[tool.atp]")


@pytest.mark.parametrize(
    ("text", "path", "line", "facts"),
    [
        (
            "[tool.atp.defaults]\nparallel_workers = 0\n",
            "tool.atp.defaults.parallel_workers",
            2,
            ("int", ">= 1"),
        ),
        (
            "[tool.atp]\nreporting = {default = 'json', verbos = true}\n",
            "tool.atp.reporting.verbos",
            2,
            ("'verbos'",),
        ),
        (
            '[project]\nname = "x"\n\n[tool.atp]\nversion = "1.0"\n\n[tool.atp.agents.a]\ntype = "cli"\n'
            "\n[tool.atp.evaluators.contains]\ntimeout_seconds = -1\n",
            "tool.atp.evaluators.contains.timeout_seconds",
            11,
            ("timeout_seconds", "86400"),
        ),
        ("[tool]\natp.reportin = 1\n", "tool.atp.reportin", 2, ("'reportin'",)),
        ("[tool.atp]\nversion = '2.0'\n", "tool.atp.version", 2, ("'2.0'", "1.x")),
        ("[tool]\natp = 3\n", "tool.atp", 2, ("[tool.atp]", "table")),
        (
            "[tool.atp]\nplugins = ['ok', 'not a module']\n",
            "tool.atp.plugins[1]",
            2,
            ("'not a module'", "module name"),
        ),
    ],
)
def test_errors_in_tool_atp_name_pyproject_the_key_path_and_a_line(
    tmp_path: Path, text: str, path: str, line: int, facts: tuple[str, ...]
) -> None:
    write(tmp_path / "pyproject.toml", text)
    with pytest.raises(ConfigFileError) as info:
        load_config(cwd=tmp_path)
    assert info.value.file == str(tmp_path / "pyproject.toml")
    assert (info.value.path, info.value.line) == (path, line), str(info.value)
    says(info.value.reason, *facts)


def test_invalid_toml_with_a_tool_atp_table_is_a_located_error(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atp]\nversion = \n")
    with pytest.raises(ConfigFileError) as info:
        load_config(cwd=tmp_path)
    assert info.value.line == 2
    says(info.value.reason, "TOML")
    assert "(at line" not in info.value.reason


def test_a_missing_variable_in_tool_atp_is_located(tmp_path: Path, plugins: Plugins) -> None:
    write(tmp_path / "pyproject.toml", '[tool.atp.agents.a]\ntype = "cli"\ncommand = "run ${NOT_SET_X}"\n')
    with pytest.raises(SuiteError) as info:
        resolve_agent(agent_definitions(load_config(cwd=tmp_path))["a"], plugins.adapters, {})
    assert (info.value.path, info.value.line) == ("tool.atp.agents.a.command", 3)


# --- plugins: the project's own plugin modules and files -------------------------------------


def test_plugin_entries_are_modules_and_files_relative_to_the_config(tmp_path: Path) -> None:
    write(tmp_path / "checks" / "house_style.py", "")
    write(
        tmp_path / "ci" / "atp.yaml",
        """
        plugins:
          - my_team.checks
          - ../checks/house_style.py
          - my_team.checks
        """,
    )
    config = load_config(tmp_path / "ci" / "atp.yaml")
    entries = config.plugin_entries()
    assert entries == ["my_team.checks", tmp_path / "checks" / "house_style.py"]
    assert isinstance(entries[1], Path) and entries[1].is_absolute()


def test_a_plugin_file_that_is_not_there_is_a_located_error(tmp_path: Path) -> None:
    path = write(tmp_path / "atp.config.yaml", "plugins:\n  - ok.module\n  - checks/absent.py\n")
    config = load_config(path)
    with pytest.raises(ConfigFileError) as info:
        config.plugin_entries()
    assert (info.value.path, info.value.line) == ("plugins[1]", 3)
    says(info.value.reason, "'checks/absent.py'", tmp_path / "checks" / "absent.py")


@pytest.mark.parametrize(
    ("entry", "facts"),
    [
        ("''", ("str", "length >= 1")),
        ("3", ("str", "int")),
        ("my-team.checks", ("'my-team.checks'", "module name")),
        ("checks/", ("'checks/'", ".py")),
        ("1checks", ("'1checks'", "module name")),
    ],
)
def test_plugin_entries_are_checked_when_the_config_loads(
    tmp_path: Path, entry: str, facts: tuple[str, ...]
) -> None:
    path = write(tmp_path / "atp.config.yaml", f"plugins:\n  - fine\n  - {entry}\n")
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert (info.value.path, info.value.line) == ("plugins[1]", 3)
    says(info.value.reason, *facts)
    write(path, "plugins: checks.py\n")
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert (info.value.path, info.value.line) == ("plugins", 1)
    says(info.value.reason, "array", "str")


# --- ${ATP_PYTHON} ------------------------------------------------------------------------------


def test_atp_python_is_the_interpreter_running_atp(tmp_path: Path, plugins: Plugins) -> None:
    import sys

    write(
        tmp_path / "atp.config.yaml",
        'agents:\n  a:\n    type: cli\n    command: ["${ATP_PYTHON}", agent.py]\n',
    )
    definition = agent_definitions(load_config(cwd=tmp_path))["a"]
    assert resolve_agent(definition, plugins.adapters, {}).settings.command == [sys.executable, "agent.py"]
    chosen = resolve_agent(definition, plugins.adapters, {"ATP_PYTHON": "/opt/python"})
    assert chosen.settings.command == ["/opt/python", "agent.py"]


# --- where the config is found (atp.core.configsearch) ------------------------------------------


def test_the_config_beside_the_suite_beats_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "defaults: {runs_per_test: 2}\n")
    suite = write(tmp_path / "proj" / "suite.yaml", "test_suite: s\ntests: []\n")
    write(tmp_path / "proj" / "pyproject.toml", "[tool.atp.defaults]\nruns_per_test = 4\n")
    config = load_config(cwd=tmp_path, suites=[suite])
    # the suite's folder is one project: its [tool.atp] wins over the working directory's file
    assert config.path == tmp_path / "proj" / "pyproject.toml" and config.base_dir == tmp_path / "proj"
    assert config.spec.defaults.runs_per_test == 4
    says(config.origin, "proj/pyproject.toml", "beside the suite")
    assert config.source == "proj/pyproject.toml [tool.atp] (beside the suite)"
    # the working directory's config is hidden by it, and said so
    (hidden,) = config.warnings
    says(hidden, tmp_path / "atp.config.yaml", "not used", tmp_path / "proj" / "pyproject.toml", "--config=")
    write(tmp_path / "proj" / "atp.config.yml", "defaults: {runs_per_test: 5}\n")
    config = load_config(cwd=tmp_path, suites=[suite])
    assert config.path == tmp_path / "proj" / "atp.config.yml" and config.spec.defaults.runs_per_test == 5
    assert config.source == "proj/atp.config.yml (beside the suite)"
    ignored, hidden = config.warnings  # the table beside it is ignored, and said so
    says(ignored, "proj/pyproject.toml", "ignored", "proj/atp.config.yml")
    says(hidden, tmp_path / "atp.config.yaml", "not used", tmp_path / "proj" / "atp.config.yml")
    # nothing hidden when the working directory has no config, or is the suite's folder
    (tmp_path / "atp.config.yaml").unlink()
    assert load_config(cwd=tmp_path, suites=[suite]).warnings == [ignored]
    assert load_config(cwd=tmp_path / "proj", suites=[suite]).warnings == [ignored]


def test_without_a_config_beside_the_suite_the_working_directory_is_used(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atp.defaults]\nruns_per_test = 3\n")
    suite = write(tmp_path / "proj" / "suite.yaml", "test_suite: s\ntests: []\n")
    config = load_config(cwd=tmp_path, suites=[suite])
    assert config.path == tmp_path / "pyproject.toml" and config.spec.defaults.runs_per_test == 3
    says(config.origin, "found in the working directory")
    assert config.source == "pyproject.toml [tool.atp] (in the working directory)"
    assert not config.warnings
    # --config wins over both
    other = write(tmp_path / "ci.yaml", "defaults: {runs_per_test: 7}\n")
    write(tmp_path / "proj" / "atp.config.yaml", "defaults: {runs_per_test: 9}\n")
    config = load_config(other, cwd=tmp_path, suites=[suite])
    assert config.spec.defaults.runs_per_test == 7
    says(config.origin, "ci.yaml", "--config")
    assert config.source == "ci.yaml (--config)"  # (relative to the working directory)


def test_no_config_found_names_every_place_looked_at(tmp_path: Path) -> None:
    suite = write(tmp_path / "proj" / "suite.yaml", "test_suite: s\ntests: []\n")
    write(tmp_path / "proj" / "pyproject.toml", '[project]\nname = "x"\n')
    config = load_config(cwd=tmp_path / "elsewhere", suites=[suite])
    assert config.path is None
    says(
        config.origin,
        "no config file",
        "atp.config.yaml",
        "atp.config.yml",
        "pyproject.toml [tool.atp]",
        f"{tmp_path / 'proj'} (beside the suite)",
        f"{tmp_path / 'elsewhere'} (the working directory)",
        f"{tmp_path / 'proj' / 'pyproject.toml'} has no [tool.atp] table",
    )
    assert config.source == (
        f"none found (looked beside the suite ({tmp_path / 'proj'}) and in the working directory)"
    )
    with pytest.raises(ConfigError) as info:
        choose_agent(agent_definitions(config), "calc", config)
    says(str(info.value), "no agent named 'calc'", "none are defined", str(tmp_path / "proj"), "elsewhere")
    # a suite in the working directory: the folder is looked in once
    here = write(tmp_path / "suite.yaml", "test_suite: s\ntests: []\n")
    origin = load_config(cwd=tmp_path, suites=[here]).origin
    assert origin.count(str(tmp_path)) == 1, origin


def test_suites_that_find_different_configs_are_refused(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "suite.yaml", "test_suite: a\ntests: []\n")
    b = write(tmp_path / "b" / "suite.yaml", "test_suite: b\ntests: []\n")
    a2 = write(tmp_path / "a" / "more.yaml", "test_suite: a2\ntests: []\n")
    write(tmp_path / "a" / "atp.config.yaml", "version: '1.0'\n")
    assert load_config(cwd=tmp_path, suites=[a, a2]).path == tmp_path / "a" / "atp.config.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path, suites=[a, b])
    says(str(info.value), a, tmp_path / "a" / "atp.config.yaml", b, "finds none", "--config")
    write(tmp_path / "atp.config.yaml", "version: '1.0'\n")  # b now finds the working directory's
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path, suites=[a, b])
    says(str(info.value), tmp_path / "a" / "atp.config.yaml", tmp_path / "atp.config.yaml")
    # two folders without configs of their own share the working directory's: no conflict
    c = write(tmp_path / "c" / "suite.yaml", "test_suite: c\ntests: []\n")
    assert load_config(cwd=tmp_path, suites=[b, c]).path == tmp_path / "atp.config.yaml"
    assert load_config(tmp_path / "atp.config.yaml", cwd=tmp_path, suites=[a, b]).path is not None


def test_a_suite_below_the_working_directory_finds_the_config_of_a_folder_above_it(tmp_path: Path) -> None:
    """`atp test suites/` with `suites/atp.config.yaml` and a suite in `suites/nested/`: every
    suite finds that one config (the nearest folder up to the working directory)."""
    from atp.core.configsearch import search

    (tmp_path / "suites" / "nested").mkdir(parents=True)
    config = tmp_path / "suites" / "atp.config.yaml"
    config.write_text("defaults: {runs_per_test: 1}\n")
    found = search([tmp_path / "suites" / "a.yaml", tmp_path / "suites" / "nested" / "b.yml"], cwd=tmp_path)
    assert found.path == config
    nested = search([tmp_path / "suites" / "nested" / "b.yml"], cwd=tmp_path)
    assert nested.path == config and "above the suite" in nested.summary(tmp_path)
    # the working directory's own config is not looked past: a suite outside it looks in its folder only
    outside = search([tmp_path / "suites" / "nested" / "b.yml"], cwd=tmp_path / "elsewhere")
    assert outside.path is None
