"""The `atp` command given hostile suite and config files, options and environment: it refuses
them with exit code 2 and one located error line, quickly, never with a traceback or a crash."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, behave_agent
from tests.e2e.test_atp_command import atp, suite_for

QUICKSTART = EXAMPLES / "quickstart" / "suite.yaml"
TEST = "  - id: a\n    task: {description: x}\n"


def alias_bomb() -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * 10)}]"]
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def assert_refused(result: object, expected: str | re.Pattern[str]) -> None:
    stdout, stderr, code = result.stdout, result.stderr, result.returncode  # type: ignore[attr-defined]
    assert code == 2, stdout + stderr
    assert "Traceback" not in stderr and stdout == ""
    if isinstance(expected, re.Pattern):
        assert expected.search(stderr.strip()), stderr
    else:
        assert expected in stderr, stderr
    assert ".]" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_suite_or_config_file_is_refused(tmp_path: Path) -> None:
    result = atp("test", "--suite=/dev/zero", cwd=tmp_path, timeout=60)
    assert_refused(result, "atp: error: /dev/zero: the file is larger than 4 MiB")
    result = atp("test", f"--suite={QUICKSTART}", "--config=/dev/zero", cwd=tmp_path, timeout=60)
    assert_refused(result, "atp: error: /dev/zero: the file is larger than 4 MiB")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # 100,000 levels crash PyYAML's C composer; 2,000 exhaust Python's recursion limit.
        # libyaml 0.2.6 (PyYAML 6.0.3+) scans the brackets ahead and stops at its own limit
        # before ATP's composer is 64 levels in, so the path shown is where the nesting starts
        (
            "test_suite: s\ndeep: " + "[" * 100_000 + "]" * 100_000 + "\ntests:\n" + TEST,
            re.compile(r":2: at deep(\[0\]){1,63}: nested deeper than 64 levels$"),
        ),
        (
            "test_suite: s\ntests:\n  - id: a\n    task:\n      description: x\n      input_data: "
            + "{a: " * 2000
            + "1"
            + "}" * 2000
            + "\n",
            ":6: at tests[0].task.input_data.a.a.a.",
        ),
        (
            alias_bomb() + "test_suite: s\ntests:\n" + TEST,
            ":5: at l4[7]: the aliases repeat more than 100,000 nodes (the limit is reached at the alias *l3)",
        ),
        (
            "test_suite: s\nloop: &a [*a]\ntests:\n" + TEST,
            ":2: at loop[0]: recursive alias *a: the anchor &a (line 2) contains it",
        ),
        (
            "test_suite: s\nagents:\n  - {name: a, type: cli, command: [x]}\n  - {name: a, type: cli, command: [y]}\ntests:\n"
            + TEST,
            ":4: at agents[1].name: duplicate agent name 'a' (first used at line 3)",
        ),
        (
            "test_suite: s\ntests:\n" + TEST + "    scoring: {quality_weight: .nan}\n",
            ":5: at tests[0].scoring.quality_weight: expected float >= 0.0",
        ),
        (
            "test_suite: s\ndefaults:\n  scoring: {quality_weight: 0, completeness_weight: 0, efficiency_weight: 0, cost_weight: 0}\ntests:\n"
            + TEST,
            ":3: at defaults.scoring: the scoring weights are all 0",
        ),
    ],
    ids=[
        "deep-100000",
        "deep-mappings",
        "alias-bomb",
        "recursive-alias",
        "duplicate-agents",
        "nan-weight",
        "zero-weights",
    ],
)
def test_hostile_suites_exit_2_with_a_located_error(
    tmp_path: Path, body: str, expected: str | re.Pattern[str]
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(body)
    result = atp("test", f"--suite={suite}", cwd=tmp_path, timeout=60)
    if isinstance(expected, re.Pattern):
        assert_refused(result, re.compile(re.escape(f"atp: error: {suite}") + expected.pattern))
    else:
        assert_refused(result, f"atp: error: {suite}{expected}")


def test_a_suite_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_bytes(b"test_suite: s\ntests:\n  - id: caf\xe9\n    task: {description: x}\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert_refused(result, f"atp: error: {suite}:3: not UTF-8 text: byte 0xe9")


@pytest.mark.parametrize("timeout", [".inf", ".nan", "1.0e+300", "-1"])
def test_an_agent_timeout_must_be_finite_and_bounded(tmp_path: Path, timeout: str) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"test_suite: s\nagents:\n  - name: agent\n    type: cli\n    command: {behave_agent('ok')!r}\n"
        f"    timeout: {timeout}\ntests:\n{TEST}"
    )
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert_refused(
        result,
        f"atp: error: {suite}:6: at agents[0].timeout: 'timeout' must be a number of seconds above 0 and at most 86400",
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("agents:\n  a: 5\n", ":2: at agents.a: expected object, got int"),
        ("secrets:\n  x: [1]\n", ":2: at secrets.x: expected str | null, got array"),
        ("secrets:\n  1: x\n", ":2: at secrets.1: invalid key 1: expected str, got int"),
        ("evaluators:\n  judge: 3\n", ":2: at evaluators.judge: expected object, got int"),
    ],
)
def test_config_errors_in_mapping_entries_name_the_entry(tmp_path: Path, config: str, expected: str) -> None:
    path = tmp_path / "atp.config.yaml"
    path.write_text(config)
    suite = suite_for(tmp_path, behave_agent("ok"), TEST)
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert_refused(result, f"atp: error: {path}{expected}")


@pytest.mark.parametrize("tags", [",", " , ", ""])
def test_tags_that_name_no_tag_are_a_usage_error(tmp_path: Path, tags: str) -> None:
    suite = suite_for(tmp_path, behave_agent("ok"), TEST)
    result = atp("test", f"--suite={suite}", f"--tags={tags}", cwd=tmp_path)
    assert_refused(result, f"atp: error: --tags: {tags!r} names no tag")
    assert not (tmp_path / ".atp").exists()  # nothing ran


def test_disabling_a_plugin_that_is_not_installed_is_warned_about_once(tmp_path: Path) -> None:
    env = {"ATP_DISABLE_PLUGINS": "nope, adaptors"}
    result = atp("test", f"--suite={QUICKSTART}", "--agent=research-agent", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    for name in ("adaptors", "nope"):
        warning = [
            line for line in lines if line.startswith(f"atp: warning: ATP_DISABLE_PLUGINS names {name!r}")
        ]
        assert len(warning) == 1, result.stderr
        assert warning[0].startswith(
            f"atp: warning: ATP_DISABLE_PLUGINS names {name!r}, which is not an installed plugin (installed: "
        )
        assert "adapters" in warning[0] and "evaluators" in warning[0] and "reporters" in warning[0]
    for value in ("all", "reporters"):
        listing = atp("plugins", cwd=tmp_path, env={"ATP_DISABLE_PLUGINS": value})
        assert listing.returncode == 0 and listing.stderr == "", listing.stderr
