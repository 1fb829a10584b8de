"""``tool_called_with`` and ``tool_sequence`` through the `atp` command: a cli agent reports its
tool calls as ``tool_call`` events (tests/agents/tool_events.py), and the assertions read them
from the run's trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, PYTHON, write
from tests.e2e.test_atp_command import atp
from tests.facts import one_error

AGENT = [PYTHON, str(AGENTS / "tool_events.py")]
CALLS = """\
        calls:
          - {tool: search, input: {query: climate, filters: {region: eu-west, max: 10}}}
          - {tool: fetch, input: {url: "https://example.org/report"}}
          - {tool: search, input: {query: ocean, filters: {region: us-east, max: 5}}}
          - {tool: summarize, input: {text: "two reports"}}
"""


def suite(tmp_path: Path, tests: str) -> Path:
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: tools\nagents:\n  - name: agent\n    type: cli\n    command: {AGENT!r}\n"
        f"tests:\n{tests}",
    )


def checks(tmp_path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The checks of each test's run, by test id and check name."""
    data = json.loads((tmp_path / "results.json").read_text())
    return {test["id"]: {c["name"]: c for c in test["runs"][0]["checks"]} for test in data["tests"]}


def test_assertions_on_the_tool_calls_pass_and_fail_as_the_trace_says(tmp_path: Path) -> None:
    path = suite(
        tmp_path,
        f"""\
  - id: as_asked
    task:
      description: research the climate
      input_data:
{CALLS}
    assertions:
      - type: tool_called_with
        config: {{tool: search, input: {{query: climate, filters: {{region: eu-west}}}}}}
      - type: tool_called_with
        name: last_search
        config: {{tool: search, call: -1, input_regex: {{filters.region: "^us-", query: "^oc"}}}}
      - type: tool_called_with
        name: both_searches
        config: {{tool: search, times: 2, input_regex: {{filters.max: "^(5|10)$"}}}}
      - type: tool_sequence
        config: {{tools: [search, fetch, summarize]}}
      - type: tool_sequence
        config: {{tools: [search, fetch, search, summarize], mode: exact}}
      - type: tool_sequence
        config: {{tools: [summarize, search, search], mode: any_order}}
      - type: tool_sequence
        config: {{tools: [search, fetch, summarize, calculator], mode: subset}}
      - type: tool_sequence
        config: {{tools: [fetch, summarize], mode: superset}}
  - id: off_course
    task:
      description: research the climate
      input_data:
{CALLS}
    assertions:
      - type: tool_called_with
        config: {{tool: search, input: {{query: weather}}}}
      - type: tool_called_with
        name: first_fetch
        config: {{tool: fetch, call: 1, input_regex: {{url: "^https://example\\\\.com/"}}}}
      - type: tool_sequence
        config: {{tools: [search, summarize], mode: exact}}
      - type: tool_sequence
        config: {{tools: [summarize, fetch]}}
      - type: tool_sequence
        config: {{tools: [search, fetch], mode: subset}}
""",
    )
    result = atp(
        "test",
        f"--suite={path}",
        "--output=console",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "  ✓ as_asked" in out and "  ✗ off_course" in out
    assert "Summary: 1 passed, 1 failed, 0 skipped" in out
    assert (
        '    - tool_called_with:search: expected a call of search where input has {"query": "weather"}; '
        'none of its 2 calls matches: call 1 {"query": "climate", "filters": {"region": "eu-west", '
        '"max": 10}} '
        '(query: expected "weather", got "climate"); call 2 {"query": "ocean", ' in out
    )
    assert (
        "    - tool_sequence:exact: expected exactly the calls search, summarize, in this order; call 2 is "
        "fetch, where the list has summarize (item 2 of the list); the calls: search, fetch, search, "
        "summarize" in out
    )

    runs = checks(tmp_path)
    passed = runs["as_asked"]
    assert all(check["passed"] for check in passed.values()), passed
    assert set(passed) == {
        "tool_called_with:search",
        "last_search",
        "both_searches",
        "tool_sequence:in_order",
        "tool_sequence:exact",
        "tool_sequence:any_order",
        "tool_sequence:subset",
        "tool_sequence:superset",
    }
    assert passed["last_search"]["message"].startswith('call 2 of search matches: {"query": "ocean"')

    failed = runs["off_course"]
    assert not any(check["passed"] for check in failed.values()), failed
    fetch = failed["first_fetch"]
    assert fetch["details"]["inputs"] == [
        {
            "call": 1,
            "input": '{"url": "https://example.org/report"}',
            "matched": False,
            "mismatches": ["url: \"https://example.org/report\" does not match '^https://example\\\\.com/'"],
        }
    ]
    in_order = failed["tool_sequence:in_order"]
    assert in_order["score"] == 0.5
    assert in_order["details"]["position"] == 2 and in_order["details"]["after_call"] == 4
    subset = failed["tool_sequence:subset"]
    assert subset["score"] == 0.75 and subset["details"]["position"] == 4
    assert subset["details"]["unexpected"] == {"summarize": 1}


def test_a_regex_that_does_not_compile_stops_the_suite_before_any_run(tmp_path: Path) -> None:
    path = suite(
        tmp_path,
        f"""\
  - id: t
    task:
      description: x
      input_data:
{CALLS}
    assertions:
      - type: tool_called_with
        config: {{tool: search, input_regex: {{query: "(clim"}}}}
""",
    )
    result = atp("test", f"--suite={path}", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    config_line = (
        path.read_text().splitlines().index('        config: {tool: search, input_regex: {query: "(clim"}}')
        + 1
    )
    one_error(
        result.stderr,
        f"{path}:{config_line}:",
        "tests[0].assertions[0].config",
        "'input_regex.query'",
        "not a valid regular expression",
        "missing ) at position 5",
    )
    assert not (tmp_path / ".atp" / "runs").exists()


def test_the_regex_time_limit_is_an_evaluator_setting(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "evaluators:\n  tool_called_with: {regex_timeout_seconds: 0.3}\n")
    path = suite(
        tmp_path,
        """\
  - id: bomb
    task:
      description: x
      input_data:
        calls:
          - {tool: search, input: {query: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}}
    assertions:
      - type: tool_called_with
        config: {tool: search, input_regex: {query: "^(a|aa)+$"}}
""",
    )
    result = atp("test", f"--suite={path}", cwd=tmp_path, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "    - tool_called_with:search: the regex of input_regex field 'query' took longer than 0.3 s on "
        "call 1 of search; ATP stopped it (evaluators.tool_called_with.regex_timeout_seconds)"
        in result.stdout
    )
