"""Numbers from outside, through the `atp` command (issue 26): an agent's events and metrics, a
judge's usage, a baseline file and the command line. Each number out of its bounds is the
sender's failure, with the field and the value as evidence; no limit passes on it, nothing
crashes, the other tests' results are intact and the run directory reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTS, EXAMPLES, PYTHON, write
from tests.e2e.test_atp_command import atp
from tests.facts import one_error, says

AGENT = [PYTHON, str(AGENTS / "hostile_numbers.py")]
HUGE = 10**400


def suite(tmp_path: Path, hostile: dict[str, Any], *, extra: str = "", fine: int = 2) -> Path:
    """The hostile test first (what the agent sends is its description; ``extra``: more of its
    lines, its assertions say), then ``fine`` tests the same agent answers honestly."""
    sent = json.dumps(json.dumps(hostile))  # a JSON text, quoted as a YAML string
    tests = f"  - id: hostile\n    task: {{description: {sent}}}\n{extra}"
    tests += "".join(f"  - id: fine{i}\n    task: {{description: honest}}\n" for i in range(1, fine + 1))
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: numbers\nagents:\n  - name: agent\n    type: cli\n    command: {AGENT!r}\ntests:\n{tests}",
    )


def run_json(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    result = atp(
        "test", "--suite=suite.yaml", f"--output=json:{out}", "--output=console", *args, cwd=tmp_path, env=env
    )
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    return result, json.loads(out.read_text())


def by_id(data: dict[str, Any]) -> dict[str, Any]:
    return {test["id"]: test for test in data["tests"]}


def reads_back(tmp_path: Path) -> None:
    """`atp report` of the run directory: no internal error, and the same tests."""
    report = atp("report", "--output=json", cwd=tmp_path)
    assert report.returncode in (0, 1) and "internal error" not in report.stderr, report.stderr


# --- an agent's events -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "facts"),
    [
        (["llm_request", {"input_tokens": HUGE}], ["payload.input_tokens", "an integer of 401 digits"]),
        (["llm_request", {"output_tokens": -5}], ["payload.output_tokens = -5"]),
        (["progress", {"current_step": 10**18}], ["payload.current_step = 1000000000000000000"]),
    ],
)
def test_an_event_with_a_count_out_of_bounds_fails_its_run_only(
    tmp_path: Path, event: list[Any], facts: list[str]
) -> None:
    events = [["tool_call", {"tool": "search"}], event, ["tool_call", {"tool": "late"}]]
    suite(tmp_path, {"events": events})
    result, data = run_json(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    tests = by_id(data)
    run = tests["hostile"]["runs"][0]
    assert run["outcome"] == "failed"
    says(run["error"], "event 1", "out of bounds", *facts)
    assert run["trace"]["tool_calls"] == {"search": 1}  # the event before it is kept, none after
    assert tests["fine1"]["status"] == "passed" and tests["fine2"]["status"] == "passed"
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    kept = (run_dir / run["events_file"]).read_text()
    assert "search" in kept and "late" not in kept and str(HUGE)[:30] not in kept
    reads_back(tmp_path)


@pytest.mark.parametrize(
    ("event", "facts"),
    [
        (["tool_call", {"tool": "t", "duration_ms": 1e300}], ["payload.duration_ms"]),
        (["llm_request", {"temperature": -1}], ["payload.temperature"]),
        (["progress", {"percentage": 250}], ["payload.percentage", "100"]),
        (["artifact_created", {"size_bytes": HUGE}], ["payload.size_bytes"]),
    ],
)
def test_an_event_with_another_number_out_of_bounds_is_not_an_event(
    tmp_path: Path, event: list[Any], facts: list[str]
) -> None:
    """Numbers ATP does not add up are bounded where events are decoded: such a line is not an
    event, and is skipped with a warning naming it (as any line that is not one)."""
    events = [["tool_call", {"tool": "search"}], event, ["tool_call", {"tool": "late"}]]
    suite(tmp_path, {"events": events})
    result, data = run_json(tmp_path, "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    run = by_id(data)["hostile"]["runs"][0]
    assert run["outcome"] == "passed" and run["trace"]["tool_calls"] == {"search": 1, "late": 1}
    (warning,) = run["warnings"]
    says(warning, "stderr line 2", "skipped", *facts)
    reads_back(tmp_path)


# --- an agent's metrics ----------------------------------------------------------------------


def test_absurd_steps_fail_the_run_and_max_steps_does_not_pass(tmp_path: Path) -> None:
    check = "    assertions: [{type: max_steps, config: {limit: 5}}]\n"
    suite(tmp_path, {"metrics": {"total_steps": 2 * 10**15}}, extra=check)
    result, data = run_json(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    tests = by_id(data)
    run = tests["hostile"]["runs"][0]
    assert run["outcome"] == "failed"
    says(run["error"], "metrics.total_steps", "2000000000000000", "out of bounds")
    (steps,) = [c for c in run["checks"] if c["name"] == "max_steps"]
    assert steps["passed"] is False  # not "the agent reported no steps"
    assert tests["fine1"]["status"] == "passed" and tests["fine2"]["status"] == "passed"
    reads_back(tmp_path)


@pytest.mark.parametrize("cost", [2e15, -3.5, 1e300])
def test_an_absurd_cost_exceeds_any_budget(tmp_path: Path, cost: float) -> None:
    suite(tmp_path, {"metrics": {"cost_usd": cost}})
    result, data = run_json(tmp_path, "--max-cost-usd=5")
    tests = by_id(data)
    run = tests["hostile"]["runs"][0]
    assert run["outcome"] == "failed"
    says(run["error"], "metrics.cost_usd", repr(cost), "out of bounds")
    # counted as the most a cost can be: the budget stops the runs after it
    assert data["budget"]["exceeded"] and data["budget"]["spent_cost_usd"] >= 5
    for name in ("fine1", "fine2"):
        says(tests[name].get("skip_reason"), "BUDGET_EXCEEDED")
    assert result.returncode != 0
    reads_back(tmp_path)


# --- a judge's usage -----------------------------------------------------------------------------


def test_a_judge_reporting_negative_usage_cannot_cancel_what_the_agent_spent(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    from tests.judge_server import JudgeServer, message

    def negative(body: dict[str, Any]) -> Any:
        call = {"score": 0.9, "explanation": "fine", "issues": [], "strengths": []}
        block = {"type": "tool_use", "id": "toolu_1", "name": "record_judgement", "input": call}
        return message([block], input_tokens=-(10**9), output_tokens=10)

    with JudgeServer(negative) as server:
        judged = "    assertions: [{type: llm_eval, config: {criteria: relevance}}]\n"
        suite(tmp_path, {"metrics": {"total_tokens": 500}}, extra=judged)
        write(
            tmp_path / "atp.config.yaml",
            f"version: '1.0'\nevaluators:\n  llm_judge:\n    base_url: {server.url}\n"
            f"    api_key: sk-ant-numbers-0001\n    cache: false\n",
        )
        result, data = run_json(tmp_path, "--max-tokens=1000")
    tests = by_id(data)
    run = tests["hostile"]["runs"][0]
    assert run["outcome"] == "error"
    (check,) = run["checks"]
    says(check["message"], "usage.input_tokens = -1000000000", "out of bounds")
    assert data["budget"]["exceeded"] and data["budget"].get("spent_tokens", 0) >= 1000
    for name in ("fine1", "fine2"):
        says(tests[name].get("skip_reason"), "BUDGET_EXCEEDED")
    assert result.returncode != 0
    reads_back(tmp_path)


# --- a baseline file ---------------------------------------------------------------------------


def baseline(tmp_path: Path, test: dict[str, Any]) -> Path:
    entry = {"mean_score": 80.0, "std": 3.0, "n_runs": 3, **test}
    path = tmp_path / "baseline.json"
    path.write_text(
        json.dumps(
            {"format": "atp-baseline", "version": "1.0", "suite": "numbers", "tests": {"fine1": entry}}
        )
    )
    return path


@pytest.mark.parametrize(
    ("field", "test", "value"),
    [
        ("tests.fine1.std", {"std": 1e200}, "1e+200"),
        ("tests.fine1.n_runs", {"n_runs": 10**18}, "1000000000000000000"),
        ("tests.fine1.mean_score", {"mean_score": -50}, "-50"),
        ("tests.fine1.runs[1].score", {"n_runs": 2, "runs": [{"score": 1}, {"score": 1e300}]}, "1e+300"),
        (
            "tests.fine1.runs[0].metrics.total_tokens",
            {"runs": [{"score": 1, "metrics": {"total_tokens": -1}}]},
            "-1",
        ),
    ],
)
def test_a_baseline_with_a_number_out_of_bounds_is_refused_before_any_run(
    tmp_path: Path, field: str, test: dict[str, Any], value: str
) -> None:
    suite(tmp_path, {})
    path = baseline(tmp_path, test)
    result = atp("test", "--suite=suite.yaml", f"--baseline={path}", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(result.stderr, path, field, value, "out of bounds")
    assert not (tmp_path / ".atp" / "runs").exists() or not any((tmp_path / ".atp" / "runs").iterdir())
    # a stored run compared with it: the same error, not a comparison
    assert atp("test", "--suite=suite.yaml", cwd=tmp_path).returncode == 0
    compared = atp("baseline", "compare", f"--baseline={path}", cwd=tmp_path)
    assert compared.returncode == 2
    one_error(compared.stderr, path, field, value)


# --- the command line ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["validate", "--suite=suite.yaml", "--timeout=nan"], "--timeout", "nan"),
        (["validate", "--suite=suite.yaml", "--timeout=1e400"], "--timeout", "1e400"),
        (["list-agents", "--check", "--timeout=inf"], "--timeout", "inf"),
        (["list-agents", "--check", "--timeout=-1"], "--timeout", "-1"),
        (["test", "--suite=suite.yaml", "--max-cost-usd=nan"], "--max-cost-usd", "nan"),
        (["test", "--suite=suite.yaml", "--max-cost-usd=1e10"], "--max-cost-usd", "1e10"),
        (["test", "--suite=suite.yaml", f"--max-tokens={10**16}"], "--max-tokens", str(10**16)),
        (
            ["judge", "calibrate", f"--labels={EXAMPLES / 'judge' / 'labels.yaml'}", "--threshold=nan"],
            "--threshold",
            "nan",
        ),
        (
            ["judge", "calibrate", f"--labels={EXAMPLES / 'judge' / 'labels.yaml'}", "--min-kappa=nan"],
            "--min-kappa",
            "nan",
        ),
        (
            ["judge", "calibrate", f"--labels={EXAMPLES / 'judge' / 'labels.yaml'}", "--min-kappa=-inf"],
            "--min-kappa",
            "-inf",
        ),
    ],
)
def test_a_float_option_out_of_bounds_is_a_usage_error(
    tmp_path: Path, args: list[str], option: str, value: str
) -> None:
    suite(tmp_path, {})
    result = atp(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    says(result.stderr, f"Invalid value for '{option}'", value)
    assert "Traceback" not in result.stderr and not (tmp_path / ".atp").exists()


def test_the_agent_used_here_answers_honestly(tmp_path: Path) -> None:
    """(The control: the same agent and suite with nothing hostile pass, so each failure above
    is the number's.)"""
    suite(tmp_path, {"metrics": {"total_steps": 3, "cost_usd": 0.5, "total_tokens": 10}})
    result, data = run_json(tmp_path, "--max-cost-usd=5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [t["status"] for t in data["tests"]] == ["passed", "passed", "passed"]
