"""``equals``: a file's text (trimmed, or exact), a JSON document, or the value at a json_path,
equals a value; the path syntax and JSON equality behind it (atp.evaluators.json_values)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from atp.core.errors import SuiteError
from atp.core.evaluator import UNMET
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from atp.core.testing import response, run_evaluator
from atp.evaluators.equals import Equals, EqualsConfig
from atp.evaluators.json_values import difference, lookup, parse_path, show_path
from tests.conftest import builtin_plugins, write
from tests.facts import says

DOC = {
    "total": 42,
    "ratio": 0.5,
    "ok": True,
    "items": [{"id": "a-1", "tags": ["x"]}, {"id": "b-2"}],
    "a b": None,
}
RESP = response(
    files={
        "answer.md": "\r\n  42\r\n\n",
        "report.json": json.dumps(DOC),
        "notes.txt": "line one\nline two\n",
    },
    structured={"status": "ok", "items": [1, 2]},
)


def one(config: dict[str, Any], resp: Any = RESP) -> Check:
    (made,) = run_evaluator(Equals, config, resp)
    return made


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("$", ()),
        ("$.total", ("total",)),
        ("total", ("total",)),
        ("$.items[1].id", ("items", 1, "id")),
        ("items.0.id", ("items", "0", "id")),
        ("$.items[-1]", ("items", -1)),
        ('$["a b"]', ("a b",)),
        ("$['a b']", ("a b",)),
        ("[0]", (0,)),
    ],
)
def test_path_syntax(text: str, steps: tuple[Any, ...]) -> None:
    assert parse_path(text) == steps


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("", "empty"),
        ("$.", "character 2"),
        ("a..b", "character 2"),
        ("$x", "'x'"),
        ("$[a]", "[a]"),
        ("$['a", "not closed"),
    ],
)
def test_wrong_paths_say_where(text: str, fact: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_path(text)
    says(str(raised.value), fact)


def test_lookup_and_why_nothing_is_there() -> None:
    assert lookup(DOC, parse_path("items.0.tags[0]")) == ("x", None)
    assert lookup(DOC, parse_path("$.items[-1].id")) == ("b-2", None)
    says(lookup(DOC, parse_path("$.items[5]"))[1], "$.items", "2 items", "[5]")
    says(lookup(DOC, parse_path("$.total.x"))[1], "$.total", "a number")
    says(lookup(DOC, parse_path("$.missing"))[1], "without the key", '"missing"')
    assert show_path(("items", 0, "a b")) == '$.items[0]["a b"]'


def test_json_equality_is_json_s() -> None:
    assert difference(1, 1.0) is None and difference({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}) is None
    assert difference(1, True) == ([], "expected a number, got a boolean")
    assert difference(True, 1) == ([], "expected a boolean, got a number")
    assert difference([1, 2], [2, 1]) == ([0], "the values differ")
    assert difference({"a": 1, "b": 2}, {"b": 2, "a": 1}) is None
    says(difference({"a": 1}, {"a": 1, "z": 0})[1], "not expected", '"z"')  # type: ignore[index]
    says(difference({"a": 1, "b": 1}, {"a": 1})[1], '"b"', "missing")  # type: ignore[index]
    assert difference({"x": [1, 2]}, {"x": [1, 2, 3]}) == (["x"], "expected an array of 2 items, got 3")
    deep: Any = 1
    for _ in range(20_000):  # no recursion: as deep as the agent likes
        deep = [deep]
    assert difference(deep, deep) is None


def test_text_is_trimmed_unless_exact() -> None:
    made = one({"path": "answer.md", "value": "42"})
    assert made.passed and made.name == "equals:answer.md"
    assert not one({"path": "answer.md", "value": "42", "exact": True}).passed
    assert one({"path": "notes.txt", "value": "line one\nline two"}).passed
    wrong = one({"path": "notes.txt", "value": "line one\nline 2"})
    assert not wrong.passed and wrong.score == 0.0
    says(wrong.message, "notes.txt", "line 2, column 6", "line 2'", "line two'")


def test_json_values_and_paths() -> None:
    assert one({"path": "report.json", "json_path": "$.total", "value": 42}).passed
    assert one({"path": "report.json", "json_path": "ratio", "value": 0.5}).passed
    assert one({"path": "report.json", "json_path": "$.items[0].tags", "value": ["x"]}).passed
    assert one({"path": "report.json", "value": DOC}).passed  # the whole document
    assert one({"path": "answer.md", "value": 42}).passed  # a non-string value: the file read as JSON
    assert one({"name": "result", "json_path": "items", "value": [1, 2]}).passed
    assert one({"name": "result", "value": {"items": [1, 2], "status": "ok"}}).passed
    wrong = one(
        {
            "path": "report.json",
            "json_path": "$.items",
            "value": [{"id": "a-1", "tags": ["y"]}, {"id": "b-2"}],
        }
    )
    assert not wrong.passed
    says(wrong.message, "$.items[0].tags[0]", '"y"', '"x"')
    assert wrong.details is not None and wrong.details["path"] == "$.items[0].tags[0]"
    assert not one({"path": "report.json", "json_path": "$.ok", "value": 1}).passed  # true is not 1


def test_nothing_to_compare_is_unmet() -> None:
    for config, fact in (
        ({"path": "gone.json", "value": 1}, "gone.json"),
        ({"path": "report.json", "json_path": "$.items[9]", "value": 1}, "[9]"),
        ({"path": "notes.txt", "json_path": "$", "value": "x"}, "not JSON"),
    ):
        made = one(config)
        assert not made.passed and (made.details or {}).get(UNMET) is True, made
        says(made.message, fact)


def test_a_glob_gives_a_check_per_file() -> None:
    resp = response(files={"a.txt": "same", "b.txt": "other"})
    checks = run_evaluator(Equals, {"path": "*.txt", "value": "same"}, resp)
    assert [(c.name, c.passed) for c in checks] == [
        ("equals:*.txt:a.txt", True),
        ("equals:*.txt:b.txt", False),
    ]


def test_the_agents_text_is_masked_in_messages() -> None:
    import anyio

    from atp.core.evaluator import EvalContext
    from atp.core.testing import make_test
    from atp.core.trace import Trace

    resp = response(files={"out.txt": "token sk-secret-123 here"})
    ctx = EvalContext(
        test=make_test(), request=None, response=resp, trace=Trace.of([]), masker=Masker(["sk-secret-123"])
    )
    config = msgspec.convert({"path": "out.txt", "value": "token"}, EqualsConfig)
    (made,) = anyio.run(Equals().evaluate, ctx, config)
    assert not made.passed and "sk-secret-123" not in made.message + json.dumps(made.details)


@pytest.mark.parametrize(
    ("config", "fact"),
    [
        ({"value": 1}, "'path'"),
        ({"path": "a", "json_path": "$[x]", "value": 1}, "[x]"),
        ({"path": "a", "value": 1, "exact": True}, "'exact'"),
        ({"path": "a"}, "value"),
    ],
)
def test_wrong_configs(config: dict[str, Any], fact: str) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert(config, EqualsConfig)
    says(str(raised.value), fact)


@pytest.mark.parametrize(
    ("value", "fact"),
    [
        (datetime.date(2024, 1, 1), "'value' is a Python date"),
        ({"when": [1, b"x"]}, "'value' at $.when[1] is a Python bytes"),
        ({"a": {1: "x"}}, "'value' at $.a has a key that is not a string: 1"),
        ({"a", "b"}, "'value' is a Python set"),
    ],
)
def test_a_value_that_is_not_json_is_refused(value: Any, fact: str) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert({"path": "a.md", "value": value}, EqualsConfig)
    says(str(raised.value), fact, "not a JSON value")


def test_an_unquoted_date_in_a_suite_is_the_text_written(tmp_path: Path) -> None:
    plugins = builtin_plugins(test_helpers=False)
    body = "test_suite: s\ntests:\n  - id: t\n    task: {description: d}\n    assertions:\n"
    assertions = [
        "      - {type: equals, config: {path: day.md, value: 2024-01-01}}\n",
        "      - {type: equals, config: {path: day.json, json_path: $.at, value: 2024-01-01 10:00:00}}\n",
        "      - {type: equals, config: {path: day.json, value: {2024-01-01: 1, at: 2024-01-01 10:00:00}}}\n",
    ]
    suite = load_suite(write(tmp_path / "s.yaml", body + "".join(assertions)), plugins.evaluators)
    resp = response(
        files={
            "day.md": "2024-01-01\n",
            "day.json": json.dumps({"2024-01-01": 1, "at": "2024-01-01 10:00:00"}),
        }
    )
    for assertion in suite.tests[0].assertions:
        (made,) = run_evaluator(Equals, msgspec.to_builtins(assertion.config), resp)
        assert made.passed, made.message


def test_a_suite_value_that_is_not_json_is_a_located_error(tmp_path: Path) -> None:
    plugins = builtin_plugins(test_helpers=False)
    body = "test_suite: s\ntests:\n  - id: t\n    task: {description: d}\n    assertions:\n"
    bad = "      - {type: equals, config: {path: a.json, value: {ids: !!set {a, b}}}}\n"
    with pytest.raises(SuiteError) as raised:
        load_suite(write(tmp_path / "s.yaml", body + bad), plugins.evaluators)
    assert raised.value.line == 6
    says(str(raised.value), "tests[0].assertions[0].config", "$.ids is a Python set", "not a JSON value")
