"""The ``junit`` reporter as CI systems meet it: a real ``atp test`` of an agent that passes,
fails, crashes, hangs and writes hostile text, its JUnit XML validated against the Apache Ant
JUnit schema with a real XML Schema validator and read back with ``junitparser``."""

from __future__ import annotations

import sys
from pathlib import Path
from xml.etree import ElementTree

import junitparser
import pytest
import xmlschema

from tests.conftest import FIXTURES, write
from tests.e2e.test_atp_command import atp

SCHEMA = FIXTURES / "junit" / "JUnit.xsd"
HOSTILE = "</failure>]]><script>alert(1)</script>\x1b[2J\x00\ufffe&amp;"

AGENT = """
import json, os, sys, time
request = json.loads(sys.stdin.readline())
task = request["task"]["description"]
print("agent log: working on " + task + " with key " + os.environ["API_KEY"], file=sys.stderr)
if task == "crash":
    print("Traceback: boom", file=sys.stderr)
    sys.exit(3)
if task == "hang":
    time.sleep(60)
text = {"pass": "all good", "fail": "nothing useful", "hostile": HOSTILE}[task]
print(json.dumps({"version": "1.0", "task_id": request["task_id"], "status": "completed",
                  "artifacts": [{"type": "file", "path": "out.txt", "content": text}], "metrics": {}}))
"""


def suite(tmp_path: Path) -> Path:
    agent = write(tmp_path / "agent.py", f"HOSTILE = {HOSTILE!r}\n" + AGENT)
    return write(
        tmp_path / "suite.yaml",
        "test_suite: junit-e2e\n"
        "agents:\n"
        f"  - name: mixed\n    type: cli\n    command: [{sys.executable!r}, {str(agent)!r}]\n"
        "    env: {API_KEY: '${AGENT_KEY}'}\n"
        "tests:\n"
        "  - id: passes\n    task: {description: pass}\n    tags: [smoke]\n"
        "    assertions: [{type: contains, config: {path: out.txt, pattern: good}}]\n"
        "  - id: fails\n    task: {description: fail}\n    runs_per_test: 2\n"
        "    assertions: [{type: contains, name: says_good, config: {path: out.txt, pattern: good}}]\n"
        "  - id: crashes\n    task: {description: crash}\n"
        "  - id: hangs\n    task: {description: hang}\n    constraints: {timeout_seconds: 1}\n"
        "  - id: skipped\n    task: {description: pass}\n    skip: upstream is down\n"
        "  - id: hostile\n    task: {description: hostile}\n"
        "    assertions: [{type: contains, name: hostile_check, config: {path: out.txt, pattern: good}}]\n",
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("junit")
    path = suite(tmp_path)
    result = atp(
        "test",
        f"--suite={path}",
        "--output=junit",
        "--output-file=report.xml",
        cwd=tmp_path,
        env={"AGENT_KEY": "sk-secret-123456"},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    return tmp_path / "report.xml"


def cases(report: Path) -> dict[str, junitparser.TestCase]:
    xml = junitparser.JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert len(suites) == 1
    return {case.name: case for case in suites[0]}


def test_the_report_is_valid_against_the_junit_schema(report: Path) -> None:
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(report))


def test_each_outcome_reads_back_as_junit_says(report: Path) -> None:
    found = cases(report)
    assert set(found) == {"passes", "fails", "crashes", "hangs", "skipped", "hostile"}
    assert found["passes"].is_passed
    [failure] = found["fails"].result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message.startswith("2 of 2 runs failed")
    assert "says_good" in failure.message
    assert "says_good" in failure.text and "agent log (last lines)" in failure.text
    [crash] = found["crashes"].result
    assert isinstance(crash, junitparser.Error) and crash.type == "agent-error"
    assert "Traceback: boom" in crash.text
    [timeout] = found["hangs"].result
    assert isinstance(timeout, junitparser.Error) and timeout.type == "timeout"
    [skip] = found["skipped"].result
    assert isinstance(skip, junitparser.Skipped) and skip.message == "upstream is down"
    suite_ = next(iter(junitparser.JUnitXml.fromfile(str(report))))
    assert (suite_.tests, suite_.failures, suite_.errors, suite_.skipped) == (6, 2, 2, 1)
    assert found["hangs"].time >= 1.0


def test_names_stay_the_same_across_runs(tmp_path: Path, report: Path) -> None:
    path = suite(tmp_path)
    result = atp(
        "test",
        f"--suite={path}",
        "--output=junit",
        "--output-file=again.xml",
        cwd=tmp_path,
        env={"AGENT_KEY": "sk-secret-123456"},
    )
    assert result.returncode == 1, result.stderr
    first = {(c.classname, c.name) for c in cases(report).values()}
    second = {(c.classname, c.name) for c in cases(tmp_path / "again.xml").values()}
    assert first == second
    assert {classname for classname, _ in first} == {"junit-e2e.mixed"}


def test_properties_carry_each_tests_figures(report: Path) -> None:
    suite_ = next(iter(junitparser.JUnitXml.fromfile(str(report))))
    properties = {p.name: p.value for p in suite_.properties()}
    assert properties["atp.suite"] == "junit-e2e" and properties["atp.agent"] == "mixed"
    assert properties["fails.runs"] == "2" and properties["fails.passed_runs"] == "0"
    assert properties["fails.pass_rate"] == "0" and properties["fails.stability"] == "stable"
    assert properties["passes.score"] == "100" and properties["skipped.runs"] == "0"


def test_the_agents_log_is_in_system_err_with_secrets_masked(report: Path) -> None:
    err = ElementTree.parse(report).findtext("testsuite/system-err")
    assert err is not None
    assert "===== crashes run 1 (agent stderr) =====" in err
    assert "agent log: working on crash" in err
    assert "sk-secret-123456" not in report.read_text()


def test_hostile_agent_text_stays_text(report: Path) -> None:
    text = report.read_text()
    assert "<script>" not in text and "]]>" not in text
    [failure] = cases(report)["hostile"].result
    assert "</failure>]]><script>alert(1)</script>\\e[2J\\x00\\ufffe&amp;" in failure.text


def test_junit_goes_to_stdout_without_a_file(tmp_path: Path) -> None:
    path = suite(tmp_path)
    result = atp(
        "test", f"--suite={path}", "--output=junit", "--tags=smoke", cwd=tmp_path, env={"AGENT_KEY": "x"}
    )
    assert result.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>'), result.stdout + result.stderr
    xmlschema.XMLSchema(str(SCHEMA)).validate(result.stdout)
    assert 'name="passes"' in result.stdout and "fails" not in result.stdout
