"""Hostile suite and config files: the loaders accept what docs/suites.md and docs/config.md
describe and refuse everything else with a located error (file, path, line), quickly, without
a traceback: unbounded numbers, deep nesting, alias bombs, huge files, odd keys."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

from atp.core import entrypoints
from atp.core.config import (
    MAX_AGENT_TIMEOUT,
    ConfigFileError,
    agent_definitions,
    interpolate,
    load_config,
    resolve_agent,
)
from atp.core.errors import ConfigError, SuiteError
from atp.core.mistakes import locate
from atp.core.plugins import Plugins
from atp.core.selection import TagFilter
from atp.core.suite import MAX_WEIGHT, ScoringWeights, Suite, load_suite
from atp.core.yamlfile import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT_CHARS,
    YamlDocument,
)
from tests.conftest import write
from tests.facts import says

TEST = "tests:\n  - id: a\n    task: {description: x}\n"


def suite_error(tmp_path: Path, plugins: Plugins, text: str) -> SuiteError:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path, plugins.evaluators)
    assert info.value.file == str(path)
    return info.value


def config_error(tmp_path: Path, text: str) -> ConfigFileError:
    path = tmp_path / "atp.config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert info.value.file == str(path)
    return info.value


def load(tmp_path: Path, plugins: Plugins, text: str) -> Suite:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return load_suite(path, plugins.evaluators)


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# --- 1. numbers are bounded ---------------------------------------------------------------


def test_msgspec_bounds_refuse_nan_but_a_lower_bound_alone_lets_inf_through() -> None:
    lower = Annotated[float, msgspec.Meta(ge=0)]
    both = Annotated[float, msgspec.Meta(ge=0, le=10)]
    assert msgspec.convert(math.inf, lower) == math.inf  # why an upper bound is needed
    for value in (math.nan, -math.inf):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(value, lower)
    for value in (math.nan, math.inf, -math.inf, 1e300):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(value, both)


@pytest.mark.parametrize(
    "value", [".inf", "-.inf", ".nan", "1.0e+300", "0", "-1", f"{MAX_AGENT_TIMEOUT + 1}", "true", "'5'"]
)
def test_agent_timeout_must_be_finite_positive_and_at_most_a_day(
    tmp_path: Path, plugins: Plugins, value: str
) -> None:
    suite = load(
        tmp_path,
        plugins,
        f"test_suite: s\nagents:\n  - name: a\n    type: cli\n    command: [x]\n    timeout: {value}\n{TEST}",
    )
    definition = agent_definitions(load_config(cwd=tmp_path), suite)["a"]
    with pytest.raises(SuiteError) as info:
        resolve_agent(definition, plugins.adapters, {})
    assert (info.value.path, info.value.line) == ("agents[0].timeout", 6)
    assert "'timeout' must be a number of seconds above 0 and at most 86400" in info.value.reason


@pytest.mark.parametrize("value", ["0.5", "5", str(MAX_AGENT_TIMEOUT)])
def test_agent_timeout_within_bounds_is_accepted(tmp_path: Path, plugins: Plugins, value: str) -> None:
    write(tmp_path / "atp.config.yaml", f"agents:\n  a: {{type: cli, command: [x], timeout: {value}}}\n")
    definition = agent_definitions(load_config(cwd=tmp_path))["a"]
    assert resolve_agent(definition, plugins.adapters, {}).timeout == float(value)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (".inf", f"<= {MAX_WEIGHT}"),
        (".nan", ">= 0"),
        ("-0.5", ">= 0"),
        ("-.inf", ">= 0"),
        ("1.0e+300", f"<= {MAX_WEIGHT}"),
    ],
)
def test_weights_must_be_finite_and_not_negative(
    tmp_path: Path, plugins: Plugins, value: str, reason: str
) -> None:
    err = suite_error(
        tmp_path, plugins, f"test_suite: s\n{TEST}    scoring:\n      quality_weight: {value}\n"
    )
    assert (err.path, err.line) == ("tests[0].scoring.quality_weight", 6)
    assert reason in err.reason
    err = suite_error(
        tmp_path, plugins, f"test_suite: s\ndefaults:\n  scoring: {{cost_weight: {value}}}\n{TEST}"
    )
    assert (err.path, err.line) == ("defaults.scoring.cost_weight", 3)


def test_weights_all_zero_after_defaults_are_refused_where_they_are_set(
    tmp_path: Path, plugins: Plugins
) -> None:
    zeros = "{quality_weight: 0, completeness_weight: 0, efficiency_weight: 0, cost_weight: 0}"
    err = suite_error(tmp_path, plugins, f"test_suite: s\ndefaults:\n  scoring: {zeros}\n{TEST}")
    assert (err.path, err.line) == ("defaults.scoring", 3)
    assert "the scoring weights are all 0" in err.reason
    err = suite_error(tmp_path, plugins, f"test_suite: s\n{TEST}    scoring: {zeros}\n")
    assert (err.path, err.line) == ("tests[0].scoring", 5)
    three = "{quality_weight: 0, completeness_weight: 0, efficiency_weight: 0}"
    err = suite_error(
        tmp_path,
        plugins,
        f"test_suite: s\ndefaults:\n  scoring: {three}\n{TEST}    scoring: {{cost_weight: 0}}\n",
    )
    assert (err.path, err.line) == ("tests[0].scoring", 7)
    suite = load(
        tmp_path,
        plugins,
        f"test_suite: s\ndefaults:\n  scoring: {zeros}\n{TEST}    scoring: {{cost_weight: 2}}\n",
    )
    assert suite.tests[0].scoring == ScoringWeights(
        quality_weight=0, completeness_weight=0, efficiency_weight=0, cost_weight=2
    )


def test_budget_is_bounded(tmp_path: Path, plugins: Plugins) -> None:
    for value in (".inf", ".nan", "-1", "1.0e+300"):
        err = suite_error(
            tmp_path, plugins, f"test_suite: s\n{TEST}    constraints: {{budget_usd: {value}}}\n"
        )
        assert (err.path, err.line) == ("tests[0].constraints.budget_usd", 5)
        err = suite_error(
            tmp_path, plugins, f"test_suite: s\ndefaults:\n  constraints:\n    budget_usd: {value}\n{TEST}"
        )
        assert (err.path, err.line) == ("defaults.constraints.budget_usd", 4)
    suite = load(tmp_path, plugins, f"test_suite: s\n{TEST}    constraints: {{budget_usd: 2.5}}\n")
    assert suite.tests[0].constraints.budget_usd == 2.5


# --- 2. nesting is bounded ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        nested(2000),
        "{a: " * 2000 + "1" + "}" * 2000,
        "\n" + " " * 10 + "- " * 2000 + "x",
        nested(100_000),
        "[" * 1_000_000,
    ],
    ids=["sequences", "mappings", "block-sequences", "100000", "unclosed-1000000"],
)
def test_deep_nesting_is_refused_before_anything_recursive_runs(
    tmp_path: Path, plugins: Plugins, value: str
) -> None:
    err = suite_error(
        tmp_path,
        plugins,
        f"test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      input_data:\n        deep: {value}\n",
    )
    says(err.reason, "nested deeper than", f"{MAX_DEPTH} levels")
    assert err.line == 7 + value.count("\n")
    assert err.path is not None and err.path.startswith("tests[0].task.input_data.deep")
    err = config_error(tmp_path, f"evaluators:\n  e:\n    deep: {value}\n")
    says(err.reason, "nested deeper than", f"{MAX_DEPTH} levels")
    assert err.line == 3 + value.count("\n")
    assert err.path is not None and err.path.startswith("evaluators.e.deep")


def test_deep_block_mappings_are_refused_at_the_line_that_goes_too_deep(tmp_path: Path) -> None:
    text = "".join("  " * level + "a:\n" for level in range(200)) + "  " * 200 + "1\n"
    err = config_error(
        tmp_path, "evaluators:\n" + "".join("  " + line for line in text.splitlines(keepends=True))
    )
    says(err.reason, "nested deeper than", f"{MAX_DEPTH} levels")
    assert err.line == MAX_DEPTH + 1  # the mapping starting at line n is level n


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path, plugins: Plugins) -> None:
    # the root mapping, tests, the test, task and input_data are 5 levels
    suite = load(
        tmp_path,
        plugins,
        f"test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      input_data:\n        deep: {nested(MAX_DEPTH - 5)}\n",
    )
    assert suite.tests[0].task.input_data is not None
    err = suite_error(
        tmp_path,
        plugins,
        f"test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      input_data:\n        deep: {nested(MAX_DEPTH - 4)}\n",
    )
    says(err.reason, "nested deeper than", f"{MAX_DEPTH} levels")


def test_nesting_through_an_alias_counts(tmp_path: Path, plugins: Plugins) -> None:
    text = f"x: &deep {nested(40)}\ny: {'[' * 30}*deep{']' * 30}\n"
    err = config_error(tmp_path, text)
    says(err.reason, "nested deeper than", f"{MAX_DEPTH} levels", "alias *deep")
    assert err.line == 2 and err.path == "y" + "[0]" * 30
    assert (
        YamlDocument(Path("ok.yaml"), f"x: &deep {nested(40)}\ny: {'[' * 20}*deep{']' * 20}\n").data
        is not None
    )


# --- 3. aliases are bounded -----------------------------------------------------------------


def alias_bomb(levels: int = 10, width: int = 10) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_at_the_alias_that_goes_over(tmp_path: Path, plugins: Plugins) -> None:
    err = suite_error(tmp_path, plugins, alias_bomb() + "test_suite: s\n" + TEST)
    # l1 to l3 repeat 12,330 nodes, each alias of l3 11,111 more: the 8th goes over
    assert err.line == 5 and err.path == "l4[7]"
    says(err.reason, "aliases repeat more than", f"{MAX_ALIAS_NODES:,} nodes", "alias *l3")
    err = config_error(tmp_path, alias_bomb())
    assert err.line == 5 and "the aliases repeat more than" in err.reason


def test_merge_key_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["m0: &m0 {a: 1, b: 2, c: 3}"]
    for level in range(1, 12):
        lines.append(f"m{level}: &m{level} {{<<: [{', '.join([f'*m{level - 1}'] * 10)}]}}")
    err = config_error(tmp_path, "\n".join(lines) + "\n")
    assert "the aliases repeat more than" in err.reason and err.line is not None


def test_recursive_aliases_are_refused(tmp_path: Path) -> None:
    err = config_error(tmp_path, "evaluators:\n  e: &a\n    - x\n    - *a\n")
    assert (err.path, err.line) == ("evaluators.e[1]", 4)
    says(err.reason, "recursive alias *a", "anchor &a", "line 2")
    err = config_error(tmp_path, "evaluators: &a {e: {again: *a}}\n")
    assert (err.path, err.line) == ("evaluators.e.again", 1) and "recursive alias *a" in err.reason


def test_ordinary_aliases_and_merge_keys_still_work(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(
        tmp_path,
        plugins,
        """test_suite: s
tests:
  - id: a
    task: &task {description: x, input_data: {k: [1, 2]}}
    assertions:
      - &check {type: contains, config: {path: out.md, pattern: hello}}
  - id: b
    task: *task
    assertions: [*check, {<<: *check, name: again}]
""",
    )
    assert suite.tests[1].task == suite.tests[0].task
    assert [a.name for a in suite.tests[1].assertions] == [None, "again"]


def test_aliases_repeating_up_to_the_limit_are_accepted(tmp_path: Path) -> None:
    # l1 and l2 repeat 1,220 nodes, each alias of l2 1,111 more: 88 of them make 98,988
    lines = alias_bomb(levels=3).splitlines()
    doc = YamlDocument(Path("c.yaml"), "\n".join([*lines, f"all: [{', '.join(['*l2'] * 88)}]"]) + "\n")
    assert len(doc.data["all"]) == 88
    with pytest.raises(SuiteError, match="the aliases repeat more than") as info:
        YamlDocument(Path("c.yaml"), "\n".join([*lines, f"all: [{', '.join(['*l2'] * 89)}]"]) + "\n")
    assert (info.value.path, info.value.line) == ("all[88]", 4)


def test_duplicate_keys_anchors_and_undefined_aliases_are_located(tmp_path: Path) -> None:
    err = config_error(tmp_path, "shared: &s\n  a: 1\n  a: 2\nevaluators: {e: *s, f: *s}\n")
    assert (err.path, err.line, err.reason) == ("shared.a", 3, "duplicate key 'a'")
    err = config_error(tmp_path, "evaluators:\n  e: {x: 1}\n  e: {x: 2}\n")
    assert (err.path, err.line, err.reason) == ("evaluators.e", 3, "duplicate key 'e'")
    err = config_error(tmp_path, "a: &x 1\nb: &x 2\n")
    assert (err.path, err.line) == ("b", 2)
    says(err.reason, "duplicate anchor &x", "line 1")
    err = config_error(tmp_path, "evaluators:\n  e: *nothing\n")
    assert (err.path, err.line) == ("evaluators.e", 2) and "undefined alias *nothing" in err.reason
    err = config_error(tmp_path, "version: '1.0'\n---\nversion: '1.0'\n")
    assert err.line == 2 and "expected a single document" in err.reason


# --- 4. file size and encoding --------------------------------------------------------------


def test_files_past_the_size_limit_are_refused(tmp_path: Path, plugins: Plugins) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * MAX_FILE_BYTES + b"\n")
    with pytest.raises(SuiteError, match="the file is larger than 4 MiB") as info:
        load_suite(big, plugins.evaluators)
    assert info.value.file == str(big)
    with pytest.raises(ConfigFileError, match="the file is larger than 4 MiB"):
        load_config(big)
    big.write_bytes(b"#" * (MAX_FILE_BYTES - 1) + b"\n")  # at the limit: read, and empty
    assert load_config(big).spec.agents == {}
    with pytest.raises(SuiteError, match="larger than 4 MiB"):
        YamlDocument(Path("text.yaml"), "#" * (MAX_FILE_BYTES + 1))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_file_is_read_only_up_to_the_limit(plugins: Plugins) -> None:
    with pytest.raises(SuiteError, match="the file is larger than 4 MiB"):
        load_suite(Path("/dev/zero"), plugins.evaluators)


def test_a_file_that_is_not_utf8_is_a_located_error(tmp_path: Path, plugins: Plugins) -> None:
    path = tmp_path / "suite.yaml"
    path.write_bytes(b"test_suite: s\ntests:\n  - id: caf\xe9\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path, plugins.evaluators)
    assert info.value.line == 3 and info.value.reason.startswith("not UTF-8 text: byte 0xe9")
    with pytest.raises(SuiteError, match="not UTF-8 text"):
        YamlDocument(Path("s.yaml"), "a: \ud800\n")  # a str with a lone surrogate


def test_control_characters_are_a_located_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: '1.0'\nreporting: {default: \x00}\n")
    assert err.line == 2 and "unacceptable character #x0000" in err.reason


def test_a_directory_is_not_a_file(tmp_path: Path, plugins: Plugins) -> None:
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(tmp_path, plugins.evaluators)


# --- 5. errors inside mappings name the key -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "line", "reason"),
    [
        ("agents:\n  a: 5\n", "agents.a", 2, "expected object, got int"),
        (
            "agents:\n  a: {type: cli}\n  b: [1]\n",
            "agents.b",
            3,
            "expected a mapping (keys written 'key: value'), got a list",
        ),
        ("secrets:\n  ok: x\n  x: [1]\n", "secrets.x", 3, "expected str | null, got array"),
        ("secrets:\n  ok: x\n  1: x\n", "secrets.1", 3, "invalid key 1: expected str, got int"),
        ("secrets: {0x10: x}\n", "secrets.16", 1, "invalid key 16: expected str, got int"),
        ("secrets:\n  true: x\n", "secrets.true", 2, "invalid key true: expected str, got bool"),
        ("evaluators:\n  e: 3\n", "evaluators.e", 2, "expected object, got int"),
        (
            "evaluators:\n  e:\n    ok: 1\n    2: 3\n",
            "evaluators.e.2",
            4,
            "invalid key 2: expected str, got int",
        ),
        ("agents:\n  a:\n    ~: 1\n", "agents.a.null", 3, "invalid key null: expected str, got null"),
    ],
)
def test_errors_in_mapping_entries_name_the_entry(
    tmp_path: Path, text: str, path: str, line: int, reason: str
) -> None:
    err = config_error(tmp_path, text)
    assert (err.path, err.line, err.reason) == (path, line, reason)
    assert ".]" not in str(err) and "[...]" not in str(err)


def test_errors_in_suite_mappings_name_the_entry(tmp_path: Path, plugins: Plugins) -> None:
    err = suite_error(
        tmp_path,
        plugins,
        "test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      input_data:\n        1.5: x\n",
    )
    assert (err.path, err.line) == ("tests[0].task.input_data.1.5", 7)
    says(err.reason, "invalid key 1.5", "expected str", "got float")
    err = suite_error(tmp_path, plugins, "test_suite: s\nagents:\n  - name: a\n    7: x\n" + TEST)
    assert (err.path, err.line) == ("agents[0].7", 4)


def test_unknown_fields_with_odd_names_are_named_whole(tmp_path: Path) -> None:
    err = config_error(tmp_path, 'reporting:\n  "x`y": 1\n')
    assert (err.path, err.line, err.reason) == ("reporting.x`y", 2, "unknown field 'x`y'")
    err = config_error(tmp_path, 'reporting:\n  "two\\nlines": 1\n')
    assert (err.path, err.line, err.reason) == ("reporting.two\\nlines", 2, "unknown field 'two\\nlines'")
    err = config_error(tmp_path, f"reporting:\n  {'k' * 1000}: 1\n")
    assert err.line == 2 and err.path is not None and len(err.path) < 100 and len(err.reason) < 120


def test_an_entry_that_cannot_be_found_points_at_the_mapping() -> None:
    assert locate({"m": {"a": 1}}, Any, "Expected `str`, got `int` - at `$.m[...]`") == (
        ["m"],
        "expected str, got int",
    )
    assert locate({"m": 5}, Any, "Expected `str`, got `int` - at `key` in `$.m`") == (
        ["m"],
        "expected str, got int",
    )


# --- 6. duplicate agent names ---------------------------------------------------------------


def test_duplicate_agent_names_in_a_suite_are_refused(tmp_path: Path, plugins: Plugins) -> None:
    err = suite_error(
        tmp_path,
        plugins,
        "test_suite: s\nagents:\n  - name: a\n    type: cli\n    command: [x]\n  - name: b\n    type: cli\n    command: [y]\n  - {name: a, type: cli, command: [z]}\n"
        + TEST,
    )
    assert (err.path, err.line) == ("agents[2].name", 9)
    says(err.reason, "duplicate agent name 'a'", "line 3")


# --- 7. --tags that name no tag -------------------------------------------------------------


@pytest.mark.parametrize("value", [",", " , ", "", ",,, ,"])
def test_tags_that_name_no_tag_are_an_error(value: str) -> None:
    with pytest.raises(ConfigError, match="names no tag"):
        TagFilter.parse([value])
    with pytest.raises(ConfigError, match="names no tag"):
        TagFilter.parse(["smoke", value])
    assert TagFilter.parse(["smoke,"]).include == frozenset({"smoke"})


# --- 8. ATP_DISABLE_PLUGINS names that are no plugin ----------------------------------------


def test_unknown_names_in_disable_plugins_are_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    import types as module_types

    module = module_types.ModuleType("atp_test_loaders_plugin")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    found = [
        entrypoints.EntryPoint("alpha", module.__name__),
        entrypoints.EntryPoint("beta", module.__name__),
    ]
    monkeypatch.setattr(entrypoints, "entry_points", lambda group, path=None: list(found))
    monkeypatch.setenv("ATP_DISABLE_PLUGINS", "beta, nope,zzz")
    loaded = Plugins()
    assert [i.name for i in loaded.infos()] == ["alpha"]
    assert loaded.warnings == [
        "ATP_DISABLE_PLUGINS names 'nope', which is not an installed plugin (installed: alpha, beta)",
        "ATP_DISABLE_PLUGINS names 'zzz', which is not an installed plugin (installed: alpha, beta)",
    ]
    assert loaded.problems() == []
    for value in ("all", "alpha,beta", ""):
        monkeypatch.setenv("ATP_DISABLE_PLUGINS", value)
        assert Plugins().warnings == []
    monkeypatch.setenv("ATP_DISABLE_PLUGINS", "nope")
    assert Plugins(disabled=["other"]).warnings == []  # names given in code, not by the variable


# --- defects found by the property-based tests ----------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("!!int ''", "cannot read the value as int"),
        ("!!int abc", "cannot read the value as int"),
        ("!!float abc", "cannot read the value as float"),
        ("!!bool maybe", "cannot read the value as bool"),
        ("1" * 5000, f"an integer longer than {MAX_INT_CHARS} characters"),
        ("1" + ":1" * 1_000_000, f"an integer longer than {MAX_INT_CHARS} characters"),
    ],
)
def test_values_yaml_cannot_read_are_located_errors(tmp_path: Path, value: str, reason: str) -> None:
    err = config_error(tmp_path, f"evaluators:\n  e:\n    x: {value}\n")
    assert err.line == 3 and reason in err.reason and err.reason.startswith("invalid YAML: ")


@pytest.mark.parametrize(
    "value", ["2024-01-01", "2001-13-45", "2001-02-30 10:00:00", "2001-12-14t21:59:43.10-05:00"]
)
def test_dates_and_times_are_read_as_written(tmp_path: Path, value: str) -> None:
    """YAML 1.1's timestamps (1.2 has none) stay the text written: nothing ATP reads is a date,
    and a date is no JSON value (an ``equals`` value, a task's input_data key)."""
    for text in (value, f"!!timestamp {value}"):
        path = write(tmp_path / "atp.config.yaml", f"evaluators:\n  e:\n    x: {text}\n    {value}: y\n")
        assert load_config(path).spec.evaluators["e"] == {"x": value, value: "y"}


@pytest.mark.parametrize("version", ["²", "١", "1" * 5000, "01.0", "+1"])
def test_odd_format_versions_are_refused_or_read_plainly(tmp_path: Path, version: str) -> None:
    path = write(tmp_path / "atp.config.yaml", f"version: '{version}'\n")
    if version == "01.0":
        assert load_config(path).spec.version == "01.0"
        return
    with pytest.raises(ConfigFileError, match="is not supported") as info:
        load_config(path)
    assert info.value.path == "version"


def test_interpolating_many_unclosed_variables_is_linear() -> None:
    text = "${A:-" * 800_000  # 4 MB: was quadratic in the text's length
    assert interpolate(text, {}, lambda variable, where: "") == text
    assert interpolate("$$a${B}$$" + text + "$$", {"B": "b"}, lambda v, w: "") == "$ab$" + text + "$"
