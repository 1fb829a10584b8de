"""The assertions people reach for first, through ``atp test``: ``equals``, ``latency``,
``cost`` and ``python`` passing and failing where they should, and ``negate: true`` on every
built-in assertion type (tests/assertion_cases.py: a run each type can judge, a config that
passes on it and one that fails)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.assertion_cases import CASES, agent_source
from tests.conftest import write
from tests.e2e.test_atp_command import atp
from tests.facts import says


def assertion(kind: str, config: dict[str, Any], **extra: Any) -> str:
    """One assertion as a line of YAML (JSON is YAML)."""
    return f"      - {json.dumps({'type': kind, 'config': config, **extra})}\n"


def project(folder: Path, tests: dict[str, str]) -> Path:
    agent = write(folder / "agent.py", agent_source())
    body = "".join(
        f"  - id: {test_id}\n    task: {{description: answer}}\n    assertions:\n{assertions}"
        for test_id, assertions in tests.items()
    )
    return write(
        folder / "suite.yaml",
        f"test_suite: assertions\nagents:\n  - name: agent\n    type: cli\n"
        f"    command: [{sys.executable!r}, {str(agent)!r}]\ntests:\n{body}",
    )


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, dict[str, Any]]:
    out = cwd / "results.json"
    result = atp("test", *args, "--output=console", f"--output=json:{out}", cwd=cwd, env=env, timeout=300)
    assert out.exists(), result.stdout + result.stderr
    return result.returncode, result.stdout + result.stderr, json.loads(out.read_text())


def checks_by_test(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {test["id"]: test["runs"][0]["checks"] for test in data["tests"]}


CHECKS = """
def three_items(run):
    count = run.data["result"]["count"]
    return count == 3, f"{count} items"


def raises(run):
    raise SystemExit("a check that exits")
"""


def test_equals_latency_cost_and_python_pass_and_fail(tmp_path: Path) -> None:
    suite_dir = tmp_path / "project"
    write(suite_dir / "suite_checks.py", CHECKS)
    passing = (
        assertion("equals", {"path": "answer.md", "value": "42"})
        + assertion("equals", {"path": "report.json", "json_path": "$.items[0].id", "value": "a-1"})
        + assertion("equals", {"name": "result", "value": {"status": "ok", "count": 3}})
        + assertion("latency", {"max_seconds": 600})
        + assertion("cost", {"max_usd": 0.05, "max_tokens": 1000})
        + assertion("python", {"expression": "int(output) == 42 and data['result']['status'] == 'ok'"})
        + assertion("python", {"function": "suite_checks:three_items"})
    )
    failing = (
        assertion("equals", {"path": "answer.md", "value": "41"})
        + assertion("equals", {"path": "report.json", "json_path": "$.total", "value": "42"})
        + assertion("latency", {"max_seconds": 0.0001})
        + assertion("cost", {"max_usd": 0.001, "max_tokens": 100})
        + assertion("python", {"expression": "len(output) > 3"})
        + assertion("python", {"function": "suite_checks:raises"})
    )
    project(suite_dir, {"passes": passing, "fails": failing})
    # run from the parent folder: the function is imported from the suite's own folder
    code, out, data = run(tmp_path, "project/suite.yaml")
    assert code == 1, out
    checks = checks_by_test(data)
    assert [t["status"] for t in data["tests"]] == ["passed", "failed"], out
    assert all(c["passed"] for c in checks["passes"]) and len(checks["passes"]) == 8
    assert checks["passes"][-1]["message"] == "3 items"
    fails = {c["name"]: c for c in checks["fails"]}
    assert not any(c["passed"] for c in fails.values()) and len(fails) == 7
    says(fails["equals:answer.md"]["message"], "line 1, column 2", "'41'", "'42'")
    says(fails["equals:report.json:$.total"]["message"], "expected a string, got a number")
    says(fails["latency"]["message"], "at most 0.0001 s", "duration_seconds")
    says(fails["cost:usd"]["message"], "$0.001", "$0.01")
    says(fails["cost:tokens"]["message"], "100 tokens", "150 tokens")
    says(fails["python"]["message"], "len(output) > 3", 'output = "42\\n"')
    raised = fails["python:suite_checks:raises"]
    says(raised["message"], "SystemExit", "a check that exits")
    assert "Traceback" in raised["details"]["traceback"]
    assert data["tests"][1]["runs"][0]["outcome"] == "failed"  # the agent's failure, not an error


def test_a_python_function_that_cannot_be_imported_makes_the_run_an_error(tmp_path: Path) -> None:
    project(tmp_path, {"broken": assertion("python", {"function": "no_such_checks:f"})})
    code, out, data = run(tmp_path, "suite.yaml")
    assert code != 0 and data["tests"][0]["runs"][0]["outcome"] == "error", out
    says(
        data["tests"][0]["runs"][0]["checks"][0]["message"], "no module named 'no_such_checks'", str(tmp_path)
    )


def test_negate_on_every_built_in_type(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    from tests.judge_server import JudgeServer

    plain = "".join(assertion(kind, passing) for kind, (passing, _) in CASES.items())
    negated_passing = "".join(assertion(kind, passing, negate=True) for kind, (passing, _) in CASES.items())
    negated_failing = "".join(assertion(kind, failing, negate=True) for kind, (_, failing) in CASES.items())
    project(
        tmp_path, {"plain": plain, "negated_passing": negated_passing, "negated_failing": negated_failing}
    )
    with JudgeServer() as server:  # every judgement scores 0.9
        write(
            tmp_path / "atp.config.yaml",
            f"version: '1.0'\nevaluators:\n  llm_judge:\n    base_url: {server.url}\n"
            f"    api_key: sk-ant-e2e-negate\n    cache_dir: {tmp_path / 'cache'}\n",
        )
        code, out, data = run(tmp_path, "suite.yaml", "--parallel=3")
    assert code == 1, out
    status = {t["id"]: t["status"] for t in data["tests"]}
    assert status == {"plain": "passed", "negated_passing": "failed", "negated_failing": "passed"}, out
    checks = checks_by_test(data)
    kinds = {c["name"].split(":")[0] for c in checks["plain"]}
    assert kinds == set(CASES)  # every built-in type, each judged
    for check in checks["negated_passing"]:
        assert not check["passed"] and check["message"].startswith("negated, so failed: "), check
        assert check["details"]["negated"] is True
    for check in checks["negated_failing"]:
        assert check["passed"] and check["message"].startswith("negated, so passed: "), check
    assert len(checks["plain"]) == len(checks["negated_passing"])
