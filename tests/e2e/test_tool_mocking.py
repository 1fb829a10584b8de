"""`atp test` with mocked tools: a cli agent calls the tools a suite declares over HTTP, and the
behaviour assertions count the calls ATP's tool server recorded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import one_error

CALLER = [PYTHON, str(AGENTS / "tool_caller.py")]
SPEC_AGENT = [PYTHON, str(AGENTS / "spec_tool_agent.py")]


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def suite(tmp_path: Path, body: str, agent: list[str] = CALLER) -> Path:
    head = (
        f"test_suite: tools-e2e\nagents:\n  - name: caller\n    type: cli\n    command: {json.dumps(agent)}\n"
    )
    return write(tmp_path / "suite.yaml", head + body)


def results_of(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "results.json").read_text())


def runs_of(results: dict[str, Any], test_id: str) -> list[dict[str, Any]]:
    return next(t["runs"] for t in results["tests"] if t["id"] == test_id)


def calls_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    [artifact] = [a for a in run["artifacts"] if a.get("name") == "calls"]
    return list(artifact["data"]["calls"])


SILENT_AGENT = """
defaults:
  tools:
    - name: web_search
      output: {results: [{title: Acme, url: "https://example.com"}]}
    - name: lookup
      responses:
        - match: {input: {id: 1}}
          output: {name: one}
        - output: {name: other}
tests:
  - id: search_and_lookup
    task:
      description: search, then look up two ids
      input_data:
        calls:
          - {tool: web_search, input: {query: acme}}
          - {tool: lookup, input: {id: 1}}
          - {tool: lookup, input: {id: 2}}
    assertions:
      - type: must_use_tools
        config: {tools: [web_search, lookup]}
      - type: max_tool_calls
        config: {limit: 3}
  - id: too_many_calls
    task:
      description: search three times
      input_data:
        calls: [{tool: web_search}, {tool: web_search}, {tool: web_search}]
    assertions:
      - type: max_tool_calls
        config: {limit: 2}
  - id: own_tools_only
    tools:
      - name: calendar
        output: {free: true}
    task:
      description: the test's tools replace the defaults'
      input_data:
        calls: [{tool: calendar}, {tool: web_search}]
    assertions:
      - type: must_use_tools
        config: {tools: [calendar]}
"""


def test_assertions_count_the_calls_the_tool_server_recorded(tmp_path: Path) -> None:
    path = suite(tmp_path, SILENT_AGENT)
    result = atp(
        "test",
        f"--suite={path}",
        "-v",
        "--output=console",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # too_many_calls fails, as it must
    assert "Traceback" not in result.stderr
    assert "  ✓ search_and_lookup" in result.stdout and "  ✓ own_tools_only" in result.stdout
    assert "  ✗ too_many_calls" in result.stdout
    # the failed check says what the recordings show
    assert "    ✗ max_tool_calls: expected at most 2 tool calls; made 3 (web_search ×3)" in result.stdout
    results = results_of(tmp_path)
    [run] = runs_of(results, "search_and_lookup")
    assert run["trace"]["tool_calls"] == {"web_search": 1, "lookup": 2}
    answers = [(c["tool"], c["http_status"], c["body"].get("output")) for c in calls_of(run)]
    assert answers == [
        ("web_search", 200, {"results": [{"title": "Acme", "url": "https://example.com"}]}),
        ("lookup", 200, {"name": "one"}),
        ("lookup", 200, {"name": "other"}),
    ]
    events = run["events"]
    assert [e["recorded_by"] for e in events] == ["tools"] * 3
    assert [e["payload"]["input"] for e in events] == [{"query": "acme"}, {"id": 1}, {"id": 2}]
    [own] = runs_of(results, "own_tools_only")
    [calendar, web_search] = calls_of(own)
    assert calendar["http_status"] == 200 and web_search["http_status"] == 404
    assert web_search["body"]["error_code"] == "TOOL_NOT_FOUND"
    assert web_search["body"]["error_details"] == {"tool": "web_search", "available_tools": ["calendar"]}


SPEC_SUITE = """
tests:
  - id: competitor_search
    tools:
      - name: web_search
        responses:
          - match: {input: {query: Slack competitors}}
            output: {results: [{title: Microsoft Teams}, {title: Discord}]}
      - name: file_write
        output: {written: true}
    task:
      description: find the competitors of Slack and write them down
      input_data:
        web_search: {query: Slack competitors}
        file_write: {path: report.md}
    constraints:
      allowed_tools: [web_search, file_write]
    assertions:
      - type: must_use_tools
        config: {tools: [web_search, file_write]}
      - type: max_tool_calls
        config: {limit: 2}
      - type: tool_called_with
        config: {tool: web_search, input: {query: Slack competitors}}
      - type: contains
        config: {name: results, pattern: Microsoft Teams}
"""


def test_an_agent_written_from_the_protocol_alone_gets_its_tool_answers(tmp_path: Path) -> None:
    """(issue 27) The agent reads ``context.tools_endpoint`` and calls ``POST
    {tools_endpoint}/<name>`` with ``{"task_id", "input"}``, as the Tool Protocol appendix shows:
    ATP's tool server answers it, records the calls, and the run passes."""
    path = suite(tmp_path, SPEC_SUITE, agent=SPEC_AGENT)
    result = atp(
        "test", f"--suite={path}", "-v", "--output=console", "--output=json:results.json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  ✓ competitor_search" in result.stdout and "warning" not in result.stdout
    [test] = results_of(tmp_path)["tests"]
    assert test["status"] == "passed" and test["score"] == 100.0
    [run] = test["runs"]
    assert run["status"] == "completed" and run["outcome"] == "passed", run["error"]
    assert all(check["passed"] for check in run["checks"]) and len(run["checks"]) == 4
    assert run["trace"]["tool_calls"] == {"web_search": 1, "file_write": 1}
    [artifact] = [a for a in run["artifacts"] if a.get("name") == "results"]
    assert artifact["data"] == {
        "web_search": {"results": [{"title": "Microsoft Teams"}, {"title": "Discord"}]},
        "file_write": {"written": True},
    }
    calls = [(e["recorded_by"], e["payload"]["tool"], e["payload"]["status"]) for e in run["events"]]
    assert calls == [("tools", "web_search", "success"), ("tools", "file_write", "success")]


def test_an_agent_of_the_older_spelling_still_gets_its_tool_answers(tmp_path: Path) -> None:
    """(issue 27) An agent written when ATP's endpoint did not end in ``/tools`` calls
    ``{tools_endpoint}/tools/<name>``: still answered and recorded, without a warning."""
    path = suite(
        tmp_path,
        """
tests:
  - id: older_spelling
    tools: [{name: lookup, output: {name: one}}, {name: tools, output: {listed: true}}]
    task:
      description: call lookup, and a tool named tools, the older way
      input_data: {older_spelling: true, calls: [{tool: lookup, input: {id: 1}}, {tool: tools}]}
    assertions:
      - type: must_use_tools
        config: {tools: [lookup, tools]}
""",
    )
    result = atp(
        "test", f"--suite={path}", "-v", "--output=console", "--output=json:results.json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stdout
    [run] = runs_of(results_of(tmp_path), "older_spelling")
    [artifact] = [a for a in run["artifacts"] if a.get("name") == "calls"]
    assert artifact["data"]["endpoint"].endswith("/tools")
    answers = [(c["tool"], c["http_status"], c["body"].get("output")) for c in calls_of(run)]
    assert answers == [("lookup", 200, {"name": "one"}), ("tools", 200, {"listed": True})]
    assert run["trace"]["tool_calls"] == {"lookup": 1, "tools": 1}


REPORTING_AGENT = """
tests:
  - id: reports_its_calls
    tools:
      - name: web_search
        output: {results: []}
      - name: flaky_api
        sequence: [{error: {code: TOOL_ERROR, message: busy, status: 503}}, {output: {ok: true}}]
    task:
      description: call and report each call as an event too
      input_data:
        report_events: true
        calls: [{tool: web_search}, {tool: flaky_api}, {tool: flaky_api}]
    assertions:
      - type: must_use_tools
        config: {tools: [web_search, flaky_api]}
      - type: max_tool_calls
        config: {limit: 3}
"""


def test_calls_the_agent_also_reports_are_counted_once(tmp_path: Path) -> None:
    path = suite(tmp_path, REPORTING_AGENT)
    result = atp(
        "test",
        f"--suite={path}",
        "-v",
        "--output=console",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stdout  # an agent reporting its own calls is doing what the protocol asks
    [run] = runs_of(results_of(tmp_path), "reports_its_calls")
    assert run["trace"]["tool_calls"] == {"web_search": 1, "flaky_api": 2}
    assert [e.get("recorded_by") for e in run["events"]] == ["tools"] * 3
    assert [e["payload"].get("status") for e in run["events"]] == ["success", "error", "success"]
    assert [c["http_status"] for c in calls_of(run)] == [200, 503, 200]


def test_parallel_runs_each_get_their_own_tool_server_address(tmp_path: Path) -> None:
    path = suite(
        tmp_path,
        """
tests:
  - id: sequence_per_run
    runs_per_test: 4
    tools:
      - name: flaky_api
        sequence: [{error: {message: busy, status: 503}}, {output: {ok: true}}]
    task:
      description: call twice
      input_data:
        calls: [{tool: flaky_api}, {tool: flaky_api}]
    assertions:
      - type: max_tool_calls
        config: {limit: 2}
""",
    )
    result = atp(
        "test", f"--suite={path}", "--parallel=4", "--output=json", "--output-file=results.json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs = runs_of(results_of(tmp_path), "sequence_per_run")
    assert len(runs) == 4
    endpoints = set()
    for run in runs:
        assert [c["http_status"] for c in calls_of(run)] == [503, 200]  # each run's sequence starts anew
        assert run["trace"]["tool_calls"] == {"flaky_api": 2}
        [artifact] = [a for a in run["artifacts"] if a.get("name") == "calls"]
        endpoints.add(artifact["data"]["endpoint"])
        assert {e["task_id"] for e in run["events"]} == {run["task_id"]}
    assert len(endpoints) == 4


def test_a_wrong_tool_declaration_is_a_located_suite_error(tmp_path: Path) -> None:
    path = suite(
        tmp_path,
        """
tests:
  - id: broken
    task: {description: x}
    tools:
      - name: weather
        output: {temp: 20}
        proxy: "https://tools.internal/weather"
""",
    )
    result = atp("test", f"--suite={path}", cwd=tmp_path)
    assert result.returncode == 2
    one_error(
        result.stderr,
        f"{path}:11:",
        "tests[0].tools[0]",
        "tool 'weather'",
        "'output' and 'proxy'",
        "exactly one of 'output', 'error', 'responses', 'sequence' and 'proxy'",
    )


def test_atp_plugins_lists_the_tool_server(tmp_path: Path) -> None:
    result = atp("plugins", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "    services: tools" in result.stdout
