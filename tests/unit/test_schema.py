"""The JSON Schemas of suites and of the config (atp.core.schema, ``atp schema``), the copies of
them in docs/schemas, and ``atp list-evaluators --verbose``.

The copies are generated with ATP's own plugins only; refresh them with:

    python -m tests.unit.test_schema
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml
from click.testing import CliRunner

from atp.core.errors import ConfigError
from atp.core.evaluator import EvalContext, Evaluator
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.results import Check
from atp.core.schema import DRAFT, config_schema, schema_text, struct_keys, suite_schema
from atp.core.suite import load_suite
from tests.conftest import EXAMPLES, FIXTURES, ROOT, builtin_plugins, write

SCHEMAS = ROOT / "docs" / "schemas"
REFRESH = "python -m tests.unit.test_schema"


def committed_copies() -> dict[Path, str]:
    """The schemas as an installation of the built-in distributions offers them (without the
    kernel's test helper adapter, ``type: function``, which tests register for themselves)."""
    plugins = builtin_plugins(test_helpers=False)
    return {
        SCHEMAS / "suite.schema.json": schema_text(suite_schema(plugins.evaluators, plugins.adapters)),
        SCHEMAS / "config.schema.json": schema_text(config_schema(plugins.adapters, plugins.evaluators)),
    }


@pytest.mark.parametrize("name", ["suite.schema.json", "config.schema.json"])
def test_the_copies_in_the_docs_are_current(name: str) -> None:
    path = SCHEMAS / name
    expected = committed_copies()[path]
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    assert current == expected, f"docs/schemas/{name} is out of date; refresh it with: {REFRESH}"


def validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.fixture
def suites(plugins: Plugins) -> jsonschema.Draft7Validator:
    return validator(suite_schema(plugins.evaluators, plugins.adapters))


@pytest.fixture
def configs(plugins: Plugins) -> jsonschema.Draft7Validator:
    return validator(config_schema(plugins.adapters, plugins.evaluators))


def errors(check: jsonschema.Draft7Validator, data: Any) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in check.iter_errors(data))


def test_the_schemas_are_draft_07(plugins: Plugins) -> None:
    for schema in (
        suite_schema(plugins.evaluators, plugins.adapters),
        config_schema(plugins.adapters, plugins.evaluators),
    ):
        assert schema["$schema"] == DRAFT
        assert "$defs" not in json.dumps(schema)  # draft-07 editors resolve #/definitions


def valid_suite_files(plugins: Plugins) -> list[Path]:
    """The example suites and the fixture suites ATP loads (the fixtures may hold broken ones)."""
    found = [EXAMPLES / "quickstart" / "suite.yaml"]
    for path in sorted((FIXTURES / "test_suites").glob("*.yaml")):
        try:
            load_suite(path, plugins.evaluators)
        except ConfigError:
            continue
        found.append(path)
    return found


def test_the_suites_atp_loads_validate(plugins: Plugins, suites: jsonschema.Draft7Validator) -> None:
    files = valid_suite_files(plugins)
    assert len(files) >= 2
    for path in files:
        assert errors(suites, yaml.safe_load(path.read_text())) == [], path


def test_the_suite_atp_init_writes_validates(suites: jsonschema.Draft7Validator) -> None:
    from atp.cli.commands.init import _template

    text = (
        _template("project", "atp-suite.yaml.tmpl").replace("__SUITE_NAME__", "s").replace("__SUITE__", "s")
    )
    assert errors(suites, yaml.safe_load(text)) == []


def quickstart() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "quickstart" / "suite.yaml").read_text())
    return data


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["tests"][1]["assertions"][2]["config"].pop("pattern"),
            "tests/1/assertions/2/config: 'pattern' is a required property",
        ),
        (
            lambda d: d["tests"][1]["assertions"][2]["config"].update(patern="x"),
            "tests/1/assertions/2/config: Additional properties are not allowed ('patern' was unexpected)",
        ),
        (
            lambda d: d["tests"][2]["assertions"][1]["config"].update(limit="five"),
            "tests/2/assertions/1/config/limit: 'five' is not of type 'integer'",
        ),
        (
            lambda d: d["tests"][0]["assertions"][0].update(type="contain"),
            "tests/0/assertions/0/type: 'contain' is not one of",
        ),
        (
            lambda d: d["tests"][0]["assertions"][0].update(critical="yes"),
            "tests/0/assertions/0/critical: 'yes' is not of type 'boolean'",
        ),
        (
            lambda d: d["agents"][0].update(comand=["x"]),
            "agents/0: Additional properties are not allowed ('comand' was unexpected)",
        ),
        (
            lambda d: d["tests"][0].update(asertions=[]),
            "tests/0: Additional properties are not allowed ('asertions' was unexpected)",
        ),
        (
            lambda d: d["tests"][0]["task"].update(expected_artifacts=[3]),
            "tests/0/task/expected_artifacts: [3] is not valid under any of the given schemas",
        ),
    ],
)
def test_wrong_suites_do_not_validate(suites: jsonschema.Draft7Validator, change: Any, expected: str) -> None:
    data = quickstart()
    change(data)
    found = errors(suites, data)
    assert any(e.startswith(expected) for e in found), found


def test_the_shorthands_and_agent_references_validate(
    tmp_path: Path, suites: jsonschema.Draft7Validator
) -> None:
    data = quickstart()
    data["version"] = 1.0
    data["agents"].append({"name": "from-the-config"})
    data["tests"][0]["task"]["expected_artifacts"] = ["report.md", {"type": "file", "name": "a.csv"}]
    data["tests"][0]["task"]["workspace_fixture"] = "fixtures/project"
    data["tests"][0]["assertions"][0]["critical"] = True
    assert errors(suites, data) == []


class WordsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    words: list[str]
    path: str | None = None


class Words(Evaluator):
    name = "words"
    summary = "has the words"
    Config = WordsConfig

    async def evaluate(self, ctx: EvalContext, config: WordsConfig) -> list[Check]:
        return []


class Opaque:
    """A type msgspec cannot describe."""


class OpaqueConfig(msgspec.Struct):
    thing: Opaque | None = None


class Odd(Evaluator):
    name = "odd"
    Config = OpaqueConfig

    async def evaluate(self, ctx: EvalContext, config: OpaqueConfig) -> list[Check]:
        return []


class ThirdParty:
    @hookimpl
    def atp_register_evaluators(self, register: Any) -> None:
        register(Words)
        register(Odd)


def test_a_plugins_config_is_part_of_the_schema(plugins: Plugins) -> None:
    plugins.register(ThirdParty(), name="third-party")
    check = validator(suite_schema(plugins.evaluators, plugins.adapters))
    suite = {
        "test_suite": "s",
        "tests": [
            {
                "id": "a",
                "task": {"description": "x"},
                "assertions": [
                    {"type": "words", "config": {"words": ["a"]}},
                    {"type": "odd", "config": {"anything": 1}},  # a Config msgspec cannot describe: unchecked
                ],
            }
        ],
    }
    assert errors(check, suite) == []
    suite["tests"][0]["assertions"][0]["config"] = {"path": "a.md"}
    assert errors(check, suite) == ["tests/0/assertions/0/config: 'words' is a required property"]


def test_configs_validate_and_wrong_ones_do_not(configs: jsonschema.Draft7Validator) -> None:
    docs = (ROOT / "docs" / "config.md").read_text()
    example = re.search(r"```yaml\n(version: \"1.0\".*?)```", docs, re.DOTALL)
    assert example is not None
    assert errors(configs, yaml.safe_load(example.group(1))) == []
    from atp.cli.commands.init import _template

    text = (
        _template("project", "atp.config.yaml.tmpl")
        .replace("__AGENT__", "a")
        .replace("__AGENT_FILE__", "a.py")
    )
    assert errors(configs, yaml.safe_load(text)) == []
    good = {
        "version": 1.0,
        "agents": {"a": {"type": "cli", "command": "x", "timeout": 5}},
        "evaluators": {"contains": {"regex_timeout_seconds": 2, "timeout_seconds": 5}, "unknown": {"x": 1}},
        "plugins": ["my_team.checks", "checks/mine.py"],
    }
    assert errors(configs, good) == []
    bad = {
        "agents": {"a": {"type": "cli", "comand": "x"}, "b": {"command": "y"}},
        "evaluators": {"contains": {"regex_timeout": 2}},
        "plugins": [""],
        "reporting": {"verbos": True},
    }
    assert errors(configs, bad) == [
        "agents/a: 'command' is a required property",
        "agents/a: Additional properties are not allowed ('comand' was unexpected)",
        "agents/b: 'type' is a required property",
        "evaluators/contains: Additional properties are not allowed ('regex_timeout' was unexpected)",
        "plugins/0: '' should be non-empty",
        "reporting: Additional properties are not allowed ('verbos' was unexpected)",
    ]


def test_struct_keys() -> None:
    keys = {k.name: k for k in struct_keys(WordsConfig)}
    assert keys["words"].type == "list[str]" and keys["words"].required and keys["words"].default is None
    assert keys["path"].type == "str | null" and keys["path"].default == "null"
    assert struct_keys(OpaqueConfig)[0].name == "thing"


# --- the commands ---------------------------------------------------------------------------


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    """The CLI's plugins loaded anew for the test, and forgotten after it (a test's local
    plugin must not stay in the process's plugins)."""
    from atp.cli import app

    app.plugins.cache_clear()
    yield
    app.plugins.cache_clear()


@pytest.mark.usefixtures("fresh_plugins")
def test_atp_schema_prints_or_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from atp.cli.commands.schema import schema_command

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(schema_command, ["suite"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["title"] == "ATP test suite"
    assert "contains" in schema["definitions"]["AssertionSpec"]["properties"]["type"]["enum"]
    result = CliRunner().invoke(schema_command, ["config", "--output-file", "config.schema.json"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "config.schema.json").read_text())["title"].startswith("ATP configuration")
    assert CliRunner().invoke(schema_command, ["other"]).exit_code == 2


@pytest.mark.usefixtures("fresh_plugins")
def test_atp_schema_includes_the_configs_own_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from atp.cli.commands.schema import schema_command

    write(
        tmp_path / "checks" / "mine.py",
        """
        import msgspec
        from atp.core.evaluator import Evaluator
        from atp.core.hookspecs import hookimpl

        class MineConfig(msgspec.Struct):
            level: int

        class Mine(Evaluator):
            name = "mine_check"
            Config = MineConfig

            async def evaluate(self, ctx, config):
                return []

        @hookimpl
        def atp_register_evaluators(register):
            register(Mine)
        """,
    )
    write(tmp_path / "atp.config.yaml", "plugins: [checks/mine.py]\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(schema_command, ["suite"])
    assert result.exit_code == 0, result.output
    assert (
        "mine_check"
        in json.loads(result.output)["definitions"]["AssertionSpec"]["properties"]["type"]["enum"]
    )


def test_list_evaluators_verbose_shows_config_keys() -> None:
    from atp.cli.commands.info import list_evaluators_command

    plain = CliRunner().invoke(list_evaluators_command, [])
    assert plain.exit_code == 0 and "pattern" not in plain.output
    result = CliRunner().invoke(list_evaluators_command, ["--verbose"])
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines()]
    assert ["pattern", "str", "required"] in lines
    assert ["regex", "bool", "default", "false"] in lines
    assert ["limit", "int", ">=", "0", "required"] in lines
    assert "settings (evaluators.contains in atp.config.yaml):" in result.output


def refresh() -> None:
    """Write the copies in docs/schemas (ATP's own plugins only)."""
    for path, text in committed_copies().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    refresh()
