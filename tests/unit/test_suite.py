from __future__ import annotations

from pathlib import Path

import pytest

from atp.core.errors import ConfigError, SuiteError
from atp.core.plugins import Plugins
from atp.core.selection import TagFilter, select_tests
from atp.core.suite import Fallback, ScoringWeights, load_suite
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
    suite = load(
        tmp_path, plugins, "test_suite: s\nversion: 1.0\ntests:\n  - id: a\n    task: {description: x}\n"
    )
    assert suite.version == "1.0"


@pytest.mark.parametrize(
    ("text", "path", "line", "reason"),
    [
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    assertions:\n      - type: nope\n",
            "tests[0].assertions[0].type",
            6,
            "unknown assertion type 'nope'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n  - id: b\n    task: {description: x}\n"
            "  - id: c\n    task: {description: x}\n    assertions:\n      - type: contains\n        config: {}\n",
            "tests[2].assertions[0].config",
            11,
            "missing required field 'pattern'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    constraints:\n      max_steps: lots\n",
            "tests[0].constraints.max_steps",
            6,
            "expected int | null, got str",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    asertions: []\n",
            "tests[0].asertions",
            5,
            "unknown field 'asertions'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    name: A\n",
            "tests[0]",
            3,
            "missing required field 'task'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n  - id: a\n    task: {description: y}\n",
            "tests[1].id",
            5,
            "duplicate test id 'a' (first used at line 3)",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    assertions:\n      - type: contains\n"
            "        config: {pattern: '(', regex: true}\n",
            "tests[0].assertions[0].config",
            7,
            "not a valid regular expression",
        ),
        (
            "test_suite: s\nversion: '2.0'\ntests:\n  - id: a\n    task: {description: x}\n",
            "version",
            2,
            "suite format version '2.0' is not supported",
        ),
        (
            "test_suite: s\ntests: []\n",
            "tests",
            2,
            "the suite has no tests",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    task: {description: y}\n",
            "tests[0].task",
            5,
            "duplicate key 'task'",
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task: {description: ''}\n",
            "tests[0].task.description",
            4,
            "expected str of length >= 1",
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
    err = error(
        tmp_path,
        plugins,
        "test_suite: s\nagents:\n  - type: cli\ntests:\n  - id: a\n    task: {description: x}\n",
    )
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


# --- tags: AND as well as OR ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expressions", "tags", "accepted"),
    [
        (["smoke+fast"], ["smoke", "fast"], True),
        (["smoke+fast"], ["smoke"], False),
        (["smoke+fast"], ["fast", "core"], False),
        (["smoke+fast,core"], ["core"], True),
        (["smoke+fast,core"], ["smoke"], False),
        (["smoke+fast,core"], ["fast", "smoke", "x"], True),
        (["smoke + fast , core"], ["smoke", "fast"], True),
        (["smoke+!slow"], ["smoke"], True),
        (["smoke+!slow"], ["smoke", "slow"], False),
        (["smoke+!slow,core"], ["core", "slow"], True),
        (["smoke+fast,core", "!slow"], ["core", "slow"], False),
        (["smoke+fast", "core+api"], ["core", "api"], True),
        (["smoke+smoke"], ["smoke"], True),
        (["!slow"], [], True),
    ],
)
def test_tags_combine_with_and_and_or(expressions: list[str], tags: list[str], accepted: bool) -> None:
    assert TagFilter.parse(expressions).accepts(tags) is accepted


def test_a_single_tag_group_is_an_alternative_like_a_tag() -> None:
    tag_filter = TagFilter.parse(["smoke+smoke,core"])
    assert tag_filter.include == frozenset({"smoke", "core"}) and tag_filter.groups == ()


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("smoke+", "'smoke+' has no tag on one side of a '+'"),
        ("+fast", "'+fast' has no tag on one side of a '+'"),
        ("smoke++fast", "has no tag on one side of a '+'"),
        ("+", "has no tag on one side of a '+'"),
        ("smoke+!", "'!' names no tag to exclude"),
        ("!slow+!flaky", "requires no tag; to leave out tests having any of these tags, write !flaky,!slow"),
        ("smoke+!smoke", "both requires and excludes 'smoke'"),
    ],
)
def test_tag_expressions_that_make_no_sense_are_errors(expression: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        TagFilter.parse(["core", expression])
    assert str(info.value).startswith("--tags: ") and reason in str(info.value)


def test_select_tests_with_and(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(tmp_path, plugins, GOOD)
    selected, deselected = select_tests(suite.tests, TagFilter.parse(["smoke+core"]))
    assert [t.id for t in selected] == ["first"] and deselected == 1
    selected, _ = select_tests(suite.tests, TagFilter.parse(["smoke+slow"]))
    assert selected == []


# --- shorthands of suites written for other implementations ----------------------------------


def test_expected_artifacts_may_be_file_names(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(
        tmp_path,
        plugins,
        """
        test_suite: s
        tests:
          - id: a
            task:
              description: x
              expected_artifacts:
                - report.md
                - data.JSON
                - charts/revenue.png
                - notes.txt
                - Makefile
                - {type: structured, name: result}
        """,
    )
    found = [(e.type, e.name, e.format) for e in suite.tests[0].task.expected_artifacts]
    assert found == [
        ("file", "report.md", "markdown"),
        ("file", "data.JSON", "json"),
        ("file", "charts/revenue.png", "png"),
        ("file", "notes.txt", "text"),
        ("file", "Makefile", None),
        ("structured", "result", None),
    ]


def test_an_expected_artifact_must_be_a_name_or_an_artifact(tmp_path: Path, plugins: Plugins) -> None:
    text = "test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      expected_artifacts: [a.md, '']\n"
    err = error(tmp_path, plugins, text)
    assert (err.path, err.line) == ("tests[0].task.expected_artifacts[1]", 6)
    text = text.replace("''", "{type: file, nam: x}")
    assert "unknown field 'nam'" in error(tmp_path, plugins, text).reason


def test_critical_assertions(tmp_path: Path, plugins: Plugins) -> None:
    suite = load(
        tmp_path,
        plugins,
        """
        test_suite: s
        tests:
          - id: a
            task: {description: x}
            assertions:
              - type: artifact_exists
                config: {path: a.md}
                critical: true
              - type: artifact_exists
                config: {path: b.md}
        """,
    )
    assert [a.critical for a in suite.tests[0].assertions] == [True, False]
    err = error(
        tmp_path,
        plugins,
        "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    assertions:\n"
        "      - type: artifact_exists\n        critical: sure\n",
    )
    assert (err.path, err.line) == ("tests[0].assertions[0].critical", 7)
    assert "expected bool" in err.reason


def test_workspace_fixture_is_a_folder_relative_to_the_suite(tmp_path: Path, plugins: Plugins) -> None:
    (tmp_path / "fixtures" / "project").mkdir(parents=True)
    text = (
        "test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      workspace_fixture: fixtures/project\n"
        "  - id: b\n    task: {description: y}\n"
    )
    suite = load(tmp_path, plugins, text)
    assert suite.tests[0].workspace_fixture == (tmp_path / "fixtures" / "project").resolve()
    assert suite.tests[0].workspace_fixture.is_absolute()
    assert suite.tests[1].workspace_fixture is None
    assert not hasattr(suite.tests[0].task, "workspace_fixture")  # not sent to the agent


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("missing", "workspace_fixture 'missing' does not exist"),
        ("file.txt", "workspace_fixture 'file.txt' is not a folder"),
        ("''", "expected str of length >= 1"),
    ],
)
def test_a_workspace_fixture_that_is_no_folder_is_a_located_error(
    tmp_path: Path, plugins: Plugins, value: str, reason: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    err = error(
        tmp_path,
        plugins,
        f"test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n"
        f"      workspace_fixture: {value}\n",
    )
    assert (err.path, err.line) == ("tests[0].task.workspace_fixture", 6)
    assert reason in err.reason


def test_other_keys_of_other_formats_stay_errors(tmp_path: Path, plugins: Plugins) -> None:
    err = error(
        tmp_path,
        plugins,
        "test_suite: s\ntests:\n  - id: a\n    task: {description: x}\n    mode: comparison\n",
    )
    assert (err.path, err.reason) == ("tests[0].mode", "unknown field 'mode'")
    err = error(
        tmp_path, plugins, "test_suite: s\ntests:\n  - id: a\n    task: {description: x, workspace: w}\n"
    )
    assert (err.path, err.reason) == (
        "tests[0].task.workspace",
        "unknown field 'workspace'; did you mean 'workspace_fixture'?",
    )
