from __future__ import annotations

from pathlib import Path

import pytest

from atp.core.errors import ConfigError, SuiteError
from atp.core.plugins import Plugins
from atp.core.suite import Fallback, ScoringWeights, TagFilter, load_suite, select_tests
from tests.conftest import write

GOOD = """
test_suite: demo
version: "1.0"
defaults:
  runs_per_test: 2
  timeout_seconds: 60
  constraints: {max_steps: 20}
  scoring: {quality_weight: 0.7}
tests:
  - id: first
    name: First
    tags: [smoke, core]
    task: {description: "Do one thing"}
    assertions:
      - type: contains
        config: {path: out.md, pattern: hello}
  - id: second
    tags: [slow]
    task: {description: "Do another"}
    constraints: {timeout_seconds: 5, max_steps: 3}
    runs_per_test: 1
    scoring: {cost_weight: 0.5}
    skip: "not ready"
"""


def load(tmp_path: Path, plugins: Plugins, text: str, **fallback: int) -> object:
    return load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators, Fallback(**fallback))


def error(tmp_path: Path, plugins: Plugins, text: str) -> SuiteError:
    with pytest.raises(SuiteError) as info:
        load(tmp_path, plugins, text)
    return info.value


def test_defaults_apply_and_tests_override(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(tmp_path, plugins, GOOD)
    first, second = suite.tests
    assert first.name == "First" and first.runs == 2
    assert first.constraints.timeout_seconds == 60 and first.constraints.max_steps == 20
    assert first.scoring == ScoringWeights(quality_weight=0.7)
    assert first.assertions[0].config.pattern == "hello"
    assert second.name == "second" and second.runs == 1
    assert second.constraints.timeout_seconds == 5 and second.constraints.max_steps == 3
    assert second.scoring == ScoringWeights(quality_weight=0.7, cost_weight=0.5)
    assert second.skip == "not ready"


def test_fallback_from_config_sits_below_the_suite(tmp_path: Path, plugins: Plugins) -> None:
    text = "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n"
    suite = load(tmp_path, plugins, text, runs_per_test=4, timeout_seconds=9)
    assert suite.tests[0].runs == 4 and suite.tests[0].timeout_seconds == 9
    plain = load(tmp_path, plugins, text)
    assert plain.tests[0].runs == 1 and plain.tests[0].timeout_seconds == 300


def test_version_written_as_a_number_is_read(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(tmp_path, plugins, "test_suite: s\nversion: 1.0\ntests:\n  - id: a\n    task: {description: x}\n")
    assert suite.version == "1.0"


@pytest.mark.parametrize(
    ("text", "path", "line", "reason"),
    [
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    assertions:\n      - type: nope\n",
            "tests[0].assertions[0].type", 6, "unknown assertion type 'nope'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n  - id: b\n    task: {description: x}\n"
            "  - id: c\n    task: {description: x}\n    assertions:\n      - type: contains\n        config: {}\n",
            "tests[2].assertions[0].config", 11, "missing required field pattern",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    constraints:\n      max_steps: lots\n",
            "tests[0].constraints.max_steps", 6, "expected int | null, got str",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    asertions: []\n",
            "tests[0].asertions", 5, "unknown field 'asertions'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    name: A\n",
            "tests[0]", 3, "missing required field task",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n  - id: a\n    task: {description: y}\n",
            "tests[1].id", 5, "duplicate test id 'a' (first used at line 3)",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    assertions:\n      - type: contains\n"
            "        config: {pattern: '(', regex: true}\n",
            "tests[0].assertions[0].config", 7, "not a valid regular expression",
        ),
        (
            "test_suite: s\nversion: '2.0'\ntests:\n  - id: a\n    task: {description: x}\n",
            "version", 2, "suite format version '2.0' is not supported",
        ),
        (
            "test_suite: s\ntests: []\n",
            "tests", 2, "the suite has no tests",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    task: {description: y}\n",
            "tests[0].task", 5, "duplicate key 'task'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: ''}\n",
            "tests[0].task.description", 4, "expected str of length >= 1",
        ),
    ],
)
def test_invalid_suite_names_file_path_and_line(
    tmp_path: Path, plugins: Plugins, text: str, path: str, line: int, reason: str
) -> None:
    err = error(tmp_path, plugins, text)
    assert err.file == str(tmp_path / "suite.yaml")
    assert (err.path, err.line) == (path, line), str(err)
    assert reason in err.reason
    assert str(err).startswith(f"{tmp_path / 'suite.yaml'}:{line}: at {path}: ")


def test_yaml_syntax_error_has_a_line(tmp_path: Path, plugins: Plugins) -> None:
    err = error(tmp_path, plugins, "test_suite: s\ntests:\n  - id: a\n   task: [unclosed\n")
    assert err.line is not None and err.line >= 4
    assert "invalid YAML" in err.reason


def test_suite_must_be_a_mapping(tmp_path: Path, plugins: Plugins) -> None:
    assert "must be a mapping" in error(tmp_path, plugins, "- just\n- a list\n").reason


def test_missing_file(tmp_path: Path, plugins: Plugins) -> None:
    with pytest.raises(SuiteError, match="file not found"):
        load_suite(tmp_path / "absent.yaml", plugins.evaluators)


def test_agent_entries_need_names(tmp_path: Path, plugins: Plugins) -> None:
    err = error(tmp_path, plugins, "test_suite: s\nagents:\n  - type: cli\ntests:\n  - id: a\n    task: {description: x}\n")
    assert (err.path, err.line) == ("agents[0]", 3)


def test_tag_filter() -> None:
    smoke = TagFilter.parse(["smoke,core"])
    assert smoke.accepts(["core"]) and not smoke.accepts(["slow"])
    not_slow = TagFilter.parse(["!slow"])
    assert not_slow.accepts([]) and not not_slow.accepts(["slow", "core"])
    both = TagFilter.parse(["smoke", "!slow"])
    assert both.accepts(["smoke"]) and not both.accepts(["smoke", "slow"]) and not both.accepts(["core"])
    with pytest.raises(ConfigError):
        TagFilter.parse(["!"])


def test_select_tests_by_tags_and_ids(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(tmp_path, plugins, GOOD)
    selected, deselected = select_tests(suite.tests, TagFilter.parse(["!slow"]))
    assert [t.id for t in selected] == ["first"] and deselected == 1
    selected, deselected = select_tests(suite.tests, None, ["second"])
    assert [t.id for t in selected] == ["second"] and deselected == 1
    with pytest.raises(ConfigError, match="no test with id 'third'"):
        select_tests(suite.tests, None, ["third"])
