"""Agent Interface Standard v1.0 agents as a user meets them: `atp test`, `atp validate` and
`atp list-agents --check`, the real `atp` command against real servers on loopback
(tests/agents/agent_interface_agent.py, and the example agent examples/agent_interface/agent.py
with its suite)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, EXAMPLES, PYTHON, write
from tests.facts import one_error
from tests.network import Server, free_port

pytest.importorskip("httpx", reason="the agent-interface adapter needs httpx")
pytest.importorskip("jsonschema", reason="the conformance checks need jsonschema")

MODES = ("healthy", "degraded", "unhealthy", "broken-tools")


LABELS = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}
TITLES = {
    "reachable": "reachable",
    "agent-card": "agent card schema",
    "health": "health schema",
    "mcp-tools": "MCP tools schema",
    "probe": "answers a probe",
    "events": "events",
    "malformed": "refuses a malformed request",
    "version": "refuses major version 2",
}


def atp(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    servers = {
        mode: Server([PYTHON, str(AGENTS / "agent_interface_agent.py"), "--mode", mode]) for mode in MODES
    }
    yield {mode: server.port for mode, server in servers.items()}
    for server in servers.values():
        server.stop()


@pytest.fixture
def suite(tmp_path: Path, ports: dict[str, int]) -> Path:
    """A suite defining an agent per mode (and one that nothing answers), with tests for them."""
    agents = "".join(
        f"  - {{name: {mode}, type: agent-interface, endpoint: 'http://127.0.0.1:{port}', "
        f"headers: {{Authorization: 'Bearer sk-e2e-secret-123'}}}}\n"
        for mode, port in ports.items()
    )
    agents += f"  - {{name: gone, type: agent-interface, endpoint: 'http://127.0.0.1:{free_port()}'}}\n"
    return write(
        tmp_path / "suite.yaml",
        f"""
test_suite: agent_interface_e2e
agents:
{agents}tests:
  - id: answers
    task: {{description: hello, input_data: {{city: Paris}}}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [lookup]}}}}
      - {{type: max_tool_calls, config: {{limit: 1}}}}
      - {{type: contains, config: {{name: result, pattern: "done: hello"}}}}
      - {{type: schema, config: {{name: result, schema: {{type: object, required: [answer, payload],
          properties: {{payload: {{type: object, properties: {{city: {{const: Paris}}}}}}}}}}}}}}
  - id: tool
    task: {{description: check lookup, input_data: {{mcp_tool: lookup, parameters: {{key: abc}}}}}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [lookup]}}}}
      - {{type: tool_called_with, config: {{tool: lookup, input: {{key: abc}}}}}}
      - {{type: contains, config: {{name: result, pattern: ABC}}}}
  - id: refuses
    task: {{description: fail}}
""",
    )


def outcomes(stdout: str) -> dict[str, str]:
    """Each check's outcome, by name, from the lines `atp validate` printed."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition("  ")
        if label in LABELS:
            name = next(
                n for n, t in sorted(TITLES.items(), key=lambda i: -len(i[1])) if rest.startswith(t + " ")
            )
            found[name] = LABELS[label]
    return found


def block(stdout: str, name: str) -> str:
    """The line of check ``name`` and the lines under it."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        label, _, rest = line.partition("  ")
        if label in LABELS and rest.startswith(TITLES[name] + " "):
            found = [line]
            for more in lines[index + 1 :]:
                if not more.startswith("      "):
                    break
                found.append(more.strip())
            return "\n".join(found)
    raise AssertionError(f"no line for {name!r} in:\n{stdout}")


# --- atp test ------------------------------------------------------------------------------------


def test_atp_test_runs_a_suite_against_an_agent_interface_agent(suite: Path, tmp_path: Path) -> None:
    result = atp(
        "test", f"--suite={suite}", "--agent=healthy", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr  # (the refusing test fails)
    assert "Agent: healthy (agent-interface)" in result.stdout
    assert "Summary: 2 passed, 1 failed, 0 skipped" in result.stdout
    assert "- failed: order 42 was not found" in result.stdout
    [results_file] = (tmp_path / "runs").glob("*/results.jsonl")
    runs = {r["test_id"]: r for r in map(json.loads, results_file.read_text().splitlines())}
    answers = runs["answers"]
    assert answers["outcome"] == "passed" and all(c["passed"] for c in answers["checks"])
    assert answers["trace"]["tool_calls"] == {"lookup": 1} and answers["metrics"]["tool_calls"] == 1
    assert answers["artifacts"][0]["name"] == "result"
    assert runs["tool"]["outcome"] == "passed", runs["tool"]["checks"]
    assert runs["refuses"]["status"] == "failed" and runs["refuses"]["error"] == "order 42 was not found"
    assert "sk-e2e-secret-123" not in "".join(
        p.read_text() for p in (tmp_path / "runs").rglob("*") if p.is_file()
    )


def test_atp_test_refuses_an_unhealthy_agent_before_any_run(
    suite: Path, tmp_path: Path, ports: dict[str, int]
) -> None:
    result = atp(
        "test", f"--suite={suite}", "--agent=unhealthy", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(
        result.stderr,
        f"agent 'unhealthy' at http://127.0.0.1:{ports['unhealthy']}",
        "unhealthy",
        "error rate 75%, 75 errors in 100 requests, LLM unavailable, last error: database unavailable",
        "allow_unhealthy: true",
    )


def test_atp_test_warns_about_a_degraded_agent_and_runs_it(suite: Path, tmp_path: Path) -> None:
    result = atp(
        "test", f"--suite={suite}", "--agent=degraded", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "atp: warning: agent 'degraded': reports itself degraded (error rate 25%, 25 errors in 100 requests); "
        "its runs go on" in result.stderr
    )
    assert "Summary: 2 passed, 1 failed" in result.stdout


@pytest.fixture(scope="module")
def hostile() -> Iterator[dict[str, int]]:
    """Agents that echo the request's Authorization in what they say at start (5,000 characters
    long), one whose /health never ends, one that lists 3,000 broken tools."""
    modes = ("echo-unhealthy", "echo-card", "echo-degraded", "drip", "many-tools")
    servers = {
        mode: Server([PYTHON, str(AGENTS / "agent_interface_agent.py"), "--mode", mode]) for mode in modes
    }
    yield {mode: server.port for mode, server in servers.items()}
    for server in servers.values():
        server.stop()


def hostile_suite(tmp_path: Path, ports: dict[str, int], token: str) -> Path:
    agents = "".join(
        f"  - {{name: {mode}, type: agent-interface, endpoint: 'http://127.0.0.1:{port}', discovery_timeout: 1, "
        f"headers: {{Authorization: 'Bearer {token}'}}}}\n"
        for mode, port in ports.items()
    )
    return write(
        tmp_path / "hostile.yaml",
        f"test_suite: hostile\nagents:\n{agents}tests:\n  - {{id: t, task: {{description: hi}}}}\n",
    )


def test_atp_test_never_prints_the_secrets_an_agent_echoes_at_start(
    tmp_path: Path, hostile: dict[str, int]
) -> None:
    """`atp: error:` and `atp: warning:` print what the adapter says as it is: the agent's text in
    it (echoing the agent's headers) is masked and cut to 200 characters."""
    token = "sk-hostile-0123456789abcdef"
    suite = hostile_suite(tmp_path, hostile, token)
    for mode, code in (("echo-unhealthy", 2), ("echo-card", 2), ("echo-degraded", 0)):
        result = atp(
            "test", f"--suite={suite}", f"--agent={mode}", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path
        )
        assert result.returncode == code, (mode, result.stdout + result.stderr)
        assert token not in result.stdout + result.stderr, mode
        assert "rejected credentials *** xxx" in result.stderr, (mode, result.stderr)
        assert len(result.stderr) < 800, (mode, result.stderr)


def test_atp_test_stops_at_discovery_that_never_ends(tmp_path: Path, hostile: dict[str, int]) -> None:
    suite = hostile_suite(tmp_path, hostile, "sk-hostile-0123456789abcdef")
    started = time.perf_counter()
    result = atp(
        "test", f"--suite={suite}", "--agent=drip", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path, timeout=60
    )
    assert time.perf_counter() - started < 20
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(
        result.stderr,
        "agent 'drip'",
        "health cannot be checked",
        f"GET http://127.0.0.1:{hostile['drip']}/health failed",
        "no answer within 1 s",
        "discovery_timeout",
        "'endpoint'",
        "allow_unhealthy: true",
    )


def test_validate_counts_schema_problems_up_to_100(tmp_path: Path, hostile: dict[str, int]) -> None:
    suite = hostile_suite(tmp_path, hostile, "sk-hostile-0123456789abcdef")
    result = atp("validate", str(suite), "--agent=many-tools", "--timeout=10", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "GET /mcp/tools breaks the standard's schema (over 100 problems)" in block(
        result.stdout, "mcp-tools"
    )


def test_list_agents_check_calls_a_server_that_accepts_and_hangs_unhealthy(tmp_path: Path) -> None:
    import socket

    with socket.socket() as silent:  # (accepts connections, never answers)
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        write(
            tmp_path / "atp.config.yaml",
            f"""
agents:
  silent: {{type: agent-interface, endpoint: 'http://127.0.0.1:{silent.getsockname()[1]}'}}
""",
        )
        result = atp("list-agents", "--check", "--timeout=1", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("  unhealthy (no answer within 1 s)"), result.stdout


# --- atp validate ----------------------------------------------------------------------------------


def test_validate_a_healthy_agent_passes_every_check_that_applies(suite: Path, tmp_path: Path) -> None:
    result = atp("validate", str(suite), "--agent=healthy", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcomes(result.stdout) == {
        **dict.fromkeys(TITLES, "passed"),
        "malformed": "skipped",
        "version": "skipped",
    }
    assert (
        "the adapter started and the agent is healthy (error rate 0%, 0 errors in 100 requests)"
        in result.stdout
    )
    assert "agent 'test-agent-001' (Test Agent), 2 tools" in block(result.stdout, "agent-card")
    assert "2 tools: lookup, add" in block(result.stdout, "mcp-tools")
    assert "the agent speaks the Agent Interface Standard v1.0, not ATP" in block(result.stdout, "malformed")
    assert result.stdout.rstrip().endswith(
        "All 6 checks that apply passed: healthy speaks the Agent Interface Standard v1.0, which ATP drives "
        "through its adapter (2 ATP-only checks skipped)."
    )
    as_json = atp("validate", str(suite), "--agent=healthy", "--json", cwd=tmp_path)
    document = json.loads(as_json.stdout)
    assert document["ok"] is True and document["type"] == "agent-interface"
    assert [c["name"] for c in document["checks"]] == list(TITLES)
    assert [c["outcome"] for c in document["checks"]][-2:] == ["skipped", "skipped"]


def test_validate_a_degraded_agent_passes_with_its_status_noted(suite: Path, tmp_path: Path) -> None:
    result = atp("validate", str(suite), "--agent=degraded", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    reachable = block(result.stdout, "reachable")
    assert "PASS  reachable" in reachable and "the agent reports itself degraded" in reachable
    assert "note: error rate 25%, 25 errors in 100 requests" in reachable
    assert "status degraded" in block(result.stdout, "health")


def test_validate_an_unhealthy_agent_fails_reachable_with_its_report(suite: Path, tmp_path: Path) -> None:
    result = atp("validate", str(suite), "--agent=unhealthy", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout) == {
        "reachable": "failed",
        "agent-card": "passed",
        "health": "passed",
        "mcp-tools": "passed",
        "probe": "skipped",
        "events": "skipped",
        "malformed": "skipped",
        "version": "skipped",
    }
    reachable = block(result.stdout, "reachable")
    assert "the agent's health check says it is unhealthy" in reachable
    assert "last error: database unavailable" in reachable and "allow_unhealthy: true" in reachable
    assert "the agent is not healthy" in block(result.stdout, "probe")
    assert "note: GET /health answered HTTP 503 with its report" in block(result.stdout, "health")
    assert result.stdout.rstrip().endswith(
        "Checks: 3 passed, 1 failed, 4 skipped of 8; fix the failures above and run atp validate again."
    )


def test_validate_names_the_broken_mcp_tools_schema(suite: Path, tmp_path: Path) -> None:
    result = atp("validate", str(suite), "--agent=broken-tools", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    found = outcomes(result.stdout)
    assert found["mcp-tools"] == "failed"
    assert [n for n, o in found.items() if o == "failed"] == ["mcp-tools"]
    tools = block(result.stdout, "mcp-tools")
    assert "GET /mcp/tools breaks the standard's schema (2 problems)" in tools
    assert "seen: at $.tools[0].parameters: 'type' is a required property" in tools
    assert "seen: at $.tools[1].parameters.properties.a.type: 'text' is not one of" in tools
    assert "fix:  answer GET /mcp/tools with every field the Agent Interface Standard v1.0 lists" in tools


def test_validate_an_agent_that_nothing_answers(suite: Path, tmp_path: Path) -> None:
    result = atp("validate", str(suite), "--agent=gone", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout) == {
        "reachable": "failed",
        "probe": "skipped",
        "events": "skipped",
        "malformed": "skipped",
        "version": "skipped",
    }
    assert "connection refused" in block(result.stdout, "reachable")


# --- atp list-agents --check -------------------------------------------------------------------------


def test_list_agents_check_shows_each_agents_health(suite: Path, tmp_path: Path) -> None:
    plain = atp("list-agents", f"--suite={suite}", cwd=tmp_path)
    assert plain.returncode == 0 and all(
        line.rstrip().endswith(tuple(f":{n}" for n in range(3, 9))) for line in plain.stdout.splitlines()
    ), plain.stdout
    result = atp("list-agents", f"--suite={suite}", "--check", "--timeout=5", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # (one is unhealthy, one unreachable)
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["healthy"].endswith("  healthy (error rate 0%, 0 errors in 100 requests)")
    assert lines["degraded"].endswith("  degraded (error rate 25%, 25 errors in 100 requests)")
    assert lines["unhealthy"].endswith(
        "  unhealthy (error rate 75%, 75 errors in 100 requests, LLM unavailable, last error: database unavailable)"
    )
    assert lines["broken-tools"].endswith("  healthy (error rate 0%, 0 errors in 100 requests)")
    assert (
        "  unreachable (cannot reach agent 'gone' at " in lines["gone"]
        and "connection refused" in lines["gone"]
    )
    assert all("type=agent-interface" in line for line in lines.values())
    assert "Traceback" not in result.stderr and "reports itself degraded" not in result.stderr


def test_list_agents_check_exits_0_when_every_agent_is_usable(tmp_path: Path, ports: dict[str, int]) -> None:
    write(
        tmp_path / "atp.config.yaml",
        f"""
agents:
  one: {{type: agent-interface, endpoint: 'http://127.0.0.1:{ports["healthy"]}'}}
  two: {{type: agent-interface, endpoint: 'http://127.0.0.1:{ports["degraded"]}'}}
  local: {{type: cli, command: [{PYTHON}, -c, pass]}}
  wrong: {{type: cli, command: [/no/such/agent]}}
""",
    )
    result = atp("list-agents", "--check", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["one"].split("  ")[-1].startswith("healthy")
    assert "  degraded (" in lines["two"]
    assert lines["local"].endswith("  healthy")  # (the default health: the adapter starts)
    assert "  unreachable (agent 'wrong': cannot start '/no/such/agent'" in lines["wrong"]
    (tmp_path / "atp.config.yaml").write_text(
        (tmp_path / "atp.config.yaml").read_text().replace("/no/such/agent", PYTHON)
    )
    assert atp("list-agents", "--check", cwd=tmp_path).returncode == 0


# --- atp validate probes with the suite's task --------------------------------------------------------


@pytest.fixture(scope="module")
def text_agent() -> Iterator[int]:
    """An agent made for one task: its action requires a `text` parameter."""
    server = Server([PYTHON, str(AGENTS / "agent_interface_agent.py"), "--mode", "needs-text"])
    yield server.port
    server.stop()


def text_suite(tmp_path: Path, port: int) -> Path:
    return write(
        tmp_path / "suite.yaml",
        f"""
test_suite: translate
agents:
  - {{name: translator, type: agent-interface, endpoint: 'http://127.0.0.1:{port}'}}
tests:
  - id: skipped
    skip: not now
    task: {{description: nothing}}
  - id: greet
    task: {{description: translate, input_data: {{text: bonjour}}}}
    assertions:
      - {{type: contains, config: {{name: result, pattern: "bonjour"}}}}
  - id: no-text
    task: {{description: translate nothing}}
""",
    )


def test_validate_with_a_suite_probes_with_its_tests_task(tmp_path: Path, text_agent: int) -> None:
    """The agent works in every test (atp test passes) and, probed with the suite's task, passes
    validation; the first test not skipped is the default, --test picks another."""
    suite = text_suite(tmp_path, text_agent)
    tested = atp("test", str(suite), "--test=greet", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    result = atp("validate", str(suite), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[1] == "Probe: the task of test 'greet' of suite 'translate'"
    assert outcomes(result.stdout)["probe"] == "passed"
    as_json = json.loads(atp("validate", str(suite), "--json", cwd=tmp_path).stdout)
    assert as_json["probe"] == {"suite": "translate", "test": "greet"} and as_json["ok"] is True
    other = atp("validate", str(suite), "--test=no-text", cwd=tmp_path)
    assert other.returncode == 1, other.stdout + other.stderr
    assert "Probe: the task of test 'no-text' of suite 'translate'" in other.stdout
    assert outcomes(other.stdout)["probe"] == "failed"
    assert "the action needs a 'text' parameter" in block(other.stdout, "probe")


def test_validate_without_a_suite_still_sends_the_generic_probe(tmp_path: Path, text_agent: int) -> None:
    write(
        tmp_path / "atp.config.yaml",
        f"agents:\n  translator: {{type: agent-interface, endpoint: 'http://127.0.0.1:{text_agent}'}}\n",
    )
    result = atp("validate", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[1].startswith("Probe: a generic task")
    assert outcomes(result.stdout)["probe"] == "failed"  # the greeting has no text to work on
    assert "the action needs a 'text' parameter" in block(result.stdout, "probe")
    as_json = json.loads(atp("validate", "--json", cwd=tmp_path).stdout)
    assert as_json["probe"] is None


def test_validate_test_needs_a_suite_that_has_it(tmp_path: Path, text_agent: int) -> None:
    suite = text_suite(tmp_path, text_agent)
    unknown = atp("validate", str(suite), "--test=nope", cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stdout == ""
    one_error(unknown.stderr, "'translate'", "no test 'nope'", "skipped, greet, no-text")
    alone = atp("validate", "--test=greet", cwd=tmp_path)
    assert alone.returncode == 2 and "--test picks a test of a suite" in alone.stderr


# --- the example ---------------------------------------------------------------------------------------


def ours(marker: str) -> list[int]:
    """The processes whose environment holds ``marker`` (a TMPDIR of the test's own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_the_example_suite_starts_its_agent_passes_validates_and_stops_it(tmp_path: Path) -> None:
    """No server started by hand: the suite's `command` starts the example agent, and it is gone
    once `atp` is done (its log file too)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {"TMPDIR": str(temp)}  # (ATP's, and so the agent's: how the test finds them)
    suite = EXAMPLES / "agent_interface" / "suite.yaml"
    result = atp("test", f"--suite={suite}", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Summary: 3 passed, 0 failed, 0 skipped" in result.stdout
    assert result.stderr == ""
    checked = atp("validate", str(suite), cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        "All 6 checks that apply passed: research-agent speaks the Agent Interface Standard v1.0"
        in checked.stdout
    )
    listed = atp("list-agents", f"--suite={suite}", "--check", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "  healthy (error rate 0%" in listed.stdout, (
        listed.stdout + listed.stderr
    )
    assert ours(f"TMPDIR={temp}\0") == []
    assert list(temp.iterdir()) == []


def test_the_example_agent_started_by_hand_is_tested_where_it_runs(tmp_path: Path) -> None:
    """The other way: an agent that runs already, and an agent definition without `command`."""
    server = Server([PYTHON, str(EXAMPLES / "agent_interface" / "agent.py"), "--port", "0"])
    try:
        text = (EXAMPLES / "agent_interface" / "suite.yaml").read_text()
        text = text.replace('    command: ["${ATP_PYTHON}", agent.py, --port, "{port}"]\n', "")
        text = text.replace('"http://127.0.0.1:{port}"', f'"http://127.0.0.1:{server.port}"')
        suite = write(tmp_path / "suite.yaml", text)
        result = atp("test", f"--suite={suite}", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Summary: 3 passed, 0 failed, 0 skipped" in result.stdout
        assert server.process.poll() is None  # (not ATP's to stop)
    finally:
        server.stop()
