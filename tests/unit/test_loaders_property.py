"""Property-based tests: whatever text a suite or config file holds, the loaders either accept
it or raise their documented, located errors (SuiteError, its subclass ConfigFileError, and
ConfigError when agents are resolved); nothing else escapes, and no error path is garbled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atp.core.config import (
    ConfigFileError,
    agent_definitions,
    choose_agent,
    load_config,
    masker_for,
    resolve_agent,
)
from atp.core.errors import ConfigError, SuiteError
from atp.core.plugins import Plugins
from atp.core.selection import TagFilter, select_tests
from atp.core.suite import suite_from_document
from atp.core.yamlfile import YamlDocument

pytestmark = pytest.mark.slow  # seconds each (simulations, property tests over many examples)

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same examples in every CI run: a failure is reproducible, never flaky
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ENV = {"HOME_DIR": "/h", "API_TOKEN": "tok-secret-123"}
SUITE_PATH = Path("suite.yaml")

# --- random YAML ------------------------------------------------------------------------------

YAML_CHARS = "[]{}:,-?&*!|>'\"#%@`\\ \t\n\r.~<=$0123456789aexyz_\u00e9\u2028\ufeff\x00\x85"

odd_scalars = st.sampled_from(
    [
        "~",
        "null",
        "true",
        "no",
        "Yes",
        "0",
        "-1",
        "007",
        "0x1F",
        "0o17",
        "0b101",
        "1_000",
        "1:30:00",
        "190:20:30.15",
        ".inf",
        "-.inf",
        ".nan",
        "1.0e+300",
        "1e300",
        "-0.0",
        "2001-12-14",
        "2001-13-45",
        "2001-02-30 10:00:00",
        "2001-12-14t21:59:43.10-05:00",
        "'1.0'",
        '"1.0"',
        '"\\ud800"',
        '"\\x00"',
        "''",
        '""',
        "<<",
        "=",
        "!!binary aGVsbG8=",
        "!!binary '!!!'",
        "9" * 40,
        "1" * 1200,
        "${X}",
        "${HOME_DIR:-/x}",
        "$$",
        "${",
        "python3",
        "cli",
        "contains",
        "schema",
        "behavior",
        "smoke",
        '"${API_TOKEN}"',
        "'${NOPE}'",
    ]
)
scalars = st.one_of(
    odd_scalars,
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12).map(
        lambda text: json.dumps(text, ensure_ascii=False)
    ),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,8}", fullmatch=True),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(lambda f: repr(f).replace("inf", ".inf").replace("nan", ".nan")),
)
anchor_names = st.sampled_from(["a", "b", "c", "d"])
prefixes = st.one_of(
    anchor_names.map(lambda n: f"&{n}"),
    st.sampled_from(
        [
            "!!str",
            "!!int",
            "!!float",
            "!!bool",
            "!!null",
            "!!map",
            "!!seq",
            "!!set",
            "!!omap",
            "!!pairs",
            "!!timestamp",
            "!!binary",
            "!!merge",
            "!custom",
            "!",
            "!!python/object:os.system",
            "!!python/name:os.system",
            "&a !!int",
            "&b !!str",
        ]
    ),
)
keys = st.one_of(
    scalars,
    st.sampled_from(
        [
            "<<",
            "? [a, b]",
            "[x]",
            "{k: v}",
            "*a ",
            "~",
            "1",
            "true",
            "2001-01-01",
            "name",
            "type",
            "timeout",
            "command",
            "id",
            "task",
            "tests",
            "config",
            "agents",
        ]
    ),
)


def flow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(keys, children), max_size=4).map(
            lambda pairs: "{" + ", ".join(f"{k} : {v}" for k, v in pairs) + "}"
        ),
        st.tuples(prefixes, children).map(lambda pair: f"{pair[0]} {pair[1]}"),
    )


yaml_values = st.recursive(scalars | anchor_names.map(lambda n: f"*{n}"), flow, max_leaves=20)
plain_values = st.recursive(  # no aliases, tags or odd keys: data a test may well hold
    scalars,
    lambda children: (
        st.lists(children, max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
        | st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), children, max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs.items()) + "}"
        )
    ),
    max_leaves=10,
)


def block(value: Any, indent: int = 0) -> str:
    """A Python value as block-style YAML; strings are written as they are (YAML text)."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return " {}"
        return "".join(f"\n{pad}{key}:{block(item, indent + 2)}" for key, item in value.items())
    if isinstance(value, list):
        if not value:
            return " []"
        return "".join(f"\n{pad}-{block(item, indent + 2)}" for item in value)
    return f" {value}"


def maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, now and then random YAML."""
    return st.integers(0, 30).flatmap(lambda n: valid if n else yaml_values)


def mapping(
    required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping with the ``required`` fields, some ``optional`` ones and now and then an odd key."""
    fields = st.fixed_dictionaries(
        {name: maybe(s) for name, s in required.items()},
        optional={name: maybe(s) for name, s in (optional or {}).items()},
    )
    odd = st.integers(0, 30).flatmap(
        lambda n: st.just({}) if n else st.dictionaries(keys, yaml_values, min_size=1, max_size=1)
    )
    return st.tuples(odd, fields).map(lambda parts: {**parts[0], **parts[1]})


def rarely(invalid: list[str], valid: list[str]) -> st.SearchStrategy[str]:
    """Mostly one of ``valid``, sometimes one of ``invalid``."""
    return st.integers(0, 6).flatmap(lambda n: st.sampled_from(valid if n else invalid))


numbers = rarely(
    ["0", "-1", ".inf", "-.inf", ".nan", "1.0e+300", "86401", "10001", "99999999999999999999", "1e3"],
    ["1", "3", "0.5", "2.5", "10", "86400"],
)
counts = rarely(
    ["0", "-1", "0.5", ".inf", "10001", "99999999999999999999", "'3'"], ["1", "2", "3", "10", "60"]
)
names = rarely(["''", "1", "~", "[a]"], ["a", "b", "agent", "x y", "'1'"])
commands = st.sampled_from(
    ["[python3, a.py]", "python3 a.py", "''", "[]", "'\"unclosed'", "[1, 2]", "${HOME_DIR}/a"]
)
words = st.sampled_from(["[web]", "[]", "web", "[web, files]"])
configs_of = {
    "contains": (
        {"pattern": st.sampled_from(["hello", "'('", "'[a-'", "''", "'a{1,2}'", "'(a+)+$'"])},
        {
            "path": st.sampled_from(["out.md", "'*.md'"]),
            "regex": st.sampled_from(["true", "false"]),
            "ignore_case": st.sampled_from(["true", "false"]),
        },
    ),
    "artifact_exists": ({}, {"path": st.sampled_from(["out.md", "''"]), "name": names}),
    "schema": (
        {
            "schema": st.sampled_from(
                [
                    "{type: object}",
                    "{type: 5}",
                    "{properties: {a: {type: string}}}",
                    "{}",
                    "{pattern: '('}",
                    "{$ref: '#'}",
                ]
            )
            | plain_values
        },
        {"name": names},
    ),
    "sections": ({"sections": st.sampled_from(["[A, B]", "[]", "A"])}, {"path": st.sampled_from(["out.md"])}),
    "must_use_tools": ({"tools": words}, {}),
    "max_steps": ({"limit": counts}, {}),
    "no_errors": ({}, {"allow_recoverable": st.sampled_from(["true", "no", "3"])}),
    "behavior": (
        {},
        {
            "must_use_tools": words,
            "forbidden_tools": words,
            "max_tool_calls": counts,
            "max_steps": counts,
            "no_errors": st.sampled_from(["true", "false"]),
        },
    ),
    "nope": ({}, {"x": counts}),
}
assertion = st.sampled_from(sorted(configs_of)).flatmap(
    lambda kind: mapping({"type": st.just(kind), "config": mapping(*configs_of[kind])}, {"name": names})
)
scoring = mapping(
    {},
    {f"{name}_weight": numbers for name in ("quality", "completeness", "efficiency", "cost")}
    | {"optimal_steps": counts},
)
constraints = mapping(
    {},
    {
        "max_steps": counts,
        "max_tokens": counts,
        "timeout_seconds": counts,
        "budget_usd": numbers,
        "allowed_tools": st.sampled_from(["[web]", "[]", "[1]"]),
    },
)
agent_settings = {
    "type": st.sampled_from(["cli", "cli", "cli", "grpc"]),
    "command": commands,
    "timeout": numbers,
    "env": st.sampled_from(["{A: b}", "{A: '${HOME_DIR}'}", "{A: 1}", "{1: a}", "{TOKEN: '${API_TOKEN}'}"]),
    "cwd": st.sampled_from(["sub", "''"]),
    "grace_seconds": numbers,
    "inherit_env": st.sampled_from(["true", "0"]),
}
suite_agent = mapping({"name": names}, agent_settings)
test_entry = mapping(
    {
        "id": st.sampled_from(["t1", "t2", "t3", "t1"]),
        "task": mapping(
            {"description": rarely(["''", "~"], ["x", "'do it'"])},
            {
                "input_data": plain_values,
                "expected_artifacts": st.sampled_from(
                    ["[{type: file, name: a.md}]", "[{type: other}]", "[]"]
                ),
            },
        ),
    },
    {
        "name": names,
        "tags": st.sampled_from(["[smoke]", "[smoke, slow]", "[]", "smoke", "[1]"]),
        "constraints": constraints,
        "assertions": st.lists(assertion, max_size=3),
        "scoring": scoring,
        "runs_per_test": counts,
        "skip": st.sampled_from(["true", "false", "'later'", "1"]),
    },
)
suites = mapping(
    {"test_suite": names, "tests": st.lists(test_entry, min_size=1, max_size=3)},
    {
        "version": st.sampled_from(["'1.0'", "1.0", "1", "'2.0'", "'1.x'", "'²'", "''"]),
        "description": names,
        "defaults": mapping(
            {},
            {
                "runs_per_test": counts,
                "timeout_seconds": counts,
                "constraints": constraints,
                "scoring": scoring,
            },
        ),
        "agents": st.lists(suite_agent, max_size=3),
    },
).map(block)
configs = mapping(
    {},
    {
        "version": st.sampled_from(["'1.0'", "1.0", "'3'"]),
        "defaults": mapping(
            {}, {"timeout_seconds": counts, "runs_per_test": counts, "parallel_workers": counts}
        ),
        "agents": st.dictionaries(names, mapping({}, agent_settings), max_size=3),
        "evaluators": st.dictionaries(
            names,
            st.sampled_from(["{model: m}", "{key: '${API_TOKEN}'}", "{k: '${MISSING_VAR}'}", "{}", "5"])
            | yaml_values,
            max_size=2,
        ),
        "reporting": mapping(
            {},
            {
                "default": st.sampled_from(["console", "[console, json]", "5"]),
                "verbose": st.sampled_from(["true", "x"]),
                "run_dir": st.sampled_from(["out", "~"]),
            },
        ),
        "secrets": st.dictionaries(
            names,
            st.sampled_from(["'${API_TOKEN}'", "'${NOPE}'", "plain", "~", "[1]"]) | yaml_values,
            max_size=2,
        ),
    },
).map(block)
documents = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=YAML_CHARS, max_size=200),
    yaml_values,
    st.tuples(st.lists(st.tuples(anchor_names, yaml_values), max_size=3), yaml_values).map(
        lambda parts: "".join(f"x{i}: &{n} {v}\n" for i, (n, v) in enumerate(parts[0])) + f"top: {parts[1]}\n"
    ),
)


# --- checks -----------------------------------------------------------------------------------


def assert_located(error: ConfigError) -> None:
    if isinstance(error, SuiteError):
        for each in error.each():
            assert each.file is not None and "[...]" not in (each.path or ""), str(error)


def check_suite(text: str, plugins: Plugins) -> None:
    """Load ``text`` as a suite; when it loads, choose and resolve its agents and select tests."""
    try:
        doc = YamlDocument(SUITE_PATH, text)
        suite = suite_from_document(doc, plugins.evaluators)
    except SuiteError as error:
        assert all(type(each) is SuiteError for each in error.each())
        assert_located(error)
        return
    assert suite.tests
    for test in suite.tests:
        assert (
            0
            < sum(
                (
                    test.scoring.quality_weight,
                    test.scoring.completeness_weight,
                    test.scoring.efficiency_weight,
                    test.scoring.cost_weight,
                )
            )
            < float("inf")
        )
    try:
        definitions = agent_definitions(load_config(cwd=Path("/nonexistent-atp-dir")), suite)
        for definition in definitions.values():
            resolved = resolve_agent(definition, plugins.adapters, ENV)
            assert resolved.timeout is None or 0 < resolved.timeout <= 86400
        choose_agent(definitions, None)
    except ConfigError as error:
        assert_located(error)
    try:
        select_tests(suite.tests, TagFilter.parse(["smoke", "!slow"]))
    except ConfigError as error:
        assert_located(error)


def check_config(text: str, folder: Path, plugins: Plugins) -> None:
    path = folder / "atp.config.yaml"
    path.write_text(text, "utf-8", errors="surrogateescape")
    try:
        config = load_config(path)
    except ConfigFileError as error:
        assert_located(error)
        return
    try:
        for definition in agent_definitions(config).values():
            resolve_agent(definition, plugins.adapters, ENV)
        for name in config.spec.evaluators:
            config.evaluator_settings(name)
        masker_for(config)
    except ConfigError as error:
        assert_located(error)


# --- the properties -------------------------------------------------------------------------


@SETTINGS
@given(text=documents)
def test_any_text_is_a_suite_or_a_located_suite_error(text: str, plugins: Plugins) -> None:
    check_suite(text, plugins)


@SETTINGS
@given(text=suites)
def test_suite_shaped_yaml_is_a_suite_or_a_located_error(text: str, plugins: Plugins) -> None:
    check_suite(text, plugins)


@SETTINGS
@given(text=documents | configs)
def test_any_text_is_a_config_or_a_located_config_error(text: str, tmp_path: Path, plugins: Plugins) -> None:
    check_config(text, tmp_path, plugins)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.binary(max_size=300))
def test_any_bytes_in_a_file_are_a_suite_or_a_located_error(
    data: bytes, tmp_path: Path, plugins: Plugins
) -> None:
    from atp.core.suite import load_suite

    path = tmp_path / "suite.yaml"
    path.write_bytes(data)
    try:
        load_suite(path, plugins.evaluators)
    except SuiteError as error:
        assert_located(error)


@pytest.mark.parametrize("text", ["test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n"])
def test_the_checks_accept_a_plain_suite(text: str, plugins: Plugins) -> None:
    check_suite(text, plugins)
