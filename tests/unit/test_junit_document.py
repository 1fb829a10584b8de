"""The ``junit`` reporter's document for results made here (no agent): an evaluation error says
why in its message, and a test whose runs passed but were fewer than planned is not shown as
passed. Each document is valid against the JUnit schema."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import xmlschema

from atp.core.results import Check, PlannedTest, RunHeader, RunStore
from atp.reporters.junit import document
from tests.conftest import FIXTURES
from tests.unit.test_html_report import NOW, run_result

SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit" / "JUnit.xsd"))


def cases(data: bytes) -> dict[str, ElementTree.Element]:
    SCHEMA.validate(data.decode())
    root = ElementTree.fromstring(data)
    return {case.get("name", ""): case for case in root.iter("testcase")}


def test_an_evaluation_error_says_which_check_could_not_be_made(tmp_path: Path) -> None:
    header = RunHeader(
        run_id="e",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW,
        tests=[PlannedTest(id="t", name="t")],
    )
    store = RunStore.create(tmp_path / "runs", header)
    unmade = Check(
        name="boom",
        passed=False,
        score=0.0,
        message="evaluator 'boom' could not check this run: RuntimeError: kaboom",
    )
    store.append(run_result("t", outcome="error", status="completed", score=0.0, checks=[unmade]))
    store.close()
    [error] = list(cases(document(store.results(), store))["t"])
    assert error.tag == "error" and error.get("type") == "evaluation-error"
    assert error.get("message") == "boom: evaluator 'boom' could not check this run: RuntimeError: kaboom"


def test_a_test_stopped_before_its_planned_runs_is_not_passed(tmp_path: Path) -> None:
    header = RunHeader(
        run_id="i",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        interrupted=True,
        stopped_by="SIGINT",
        tests=[PlannedTest(id="t", name="t", runs=3), PlannedTest(id="u", name="u")],
    )
    store = RunStore.create(tmp_path / "runs", header)
    store.append(run_result("t", 1))
    store.append(run_result("u", 1))
    store.close()
    found = cases(document(store.results(), store))
    [skipped] = list(found["t"])
    assert skipped.tag == "skipped"
    assert (
        skipped.get("message")
        == "not finished: 1 of 3 planned runs ran before the run stopped (SIGINT); they passed"
    )
    assert list(found["u"]) == []  # its one planned run ran and passed
    suite = ElementTree.fromstring(document(store.results(), store)).find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("skipped")) == ("2", "1")
