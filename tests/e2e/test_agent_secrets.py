"""`atp test` giving network agents a secret in `context.environment` (an agent's `secrets:`,
docs/agents.md "Secrets and context.environment"): an http, a websocket and a grpc agent
(tests/agents/environment_agent.py) that fail without the token, prove they got the right one
(its SHA-256 in a file artifact) and quote it carelessly in an event, a file and a structured
artifact; the token is in none of what ATP writes: the console, the JSON results, the run
directory, the HTML and JUnit reports."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import one_error
from tests.network import Server

TOKEN = "tok-7c41e9b2-do-not-print"
DIGEST = hashlib.sha256(TOKEN.encode()).hexdigest()
SCHEMES = {"http": "http", "websocket": "ws", "grpc": "grpc"}

SUITE = """
test_suite: secrets_{transport}
agents:
  - name: agent
    type: {transport}
    endpoint: "{scheme}://127.0.0.1:{port}"
    env: {{REGION: eu-west}}
    secrets: [ATP_E2E_TOKEN]
  - name: renamed
    type: {transport}
    endpoint: "{scheme}://127.0.0.1:{port}"
    secrets: {{ATP_E2E_TOKEN: MY_SERVICE_TOKEN}}
  - name: without
    type: {transport}
    endpoint: "{scheme}://127.0.0.1:{port}"
tests:
  - id: uses_the_token
    task: {{description: "Call the service"}}
    assertions:
      - {{type: contains, config: {{path: env.txt, pattern: "sha256={digest}"}}}}
      - {{type: contains, config: {{path: env.txt, pattern: "region=eu-west"}}}}
  - id: quotes_the_token
    task: {{description: "Call the service"}}
    assertions:
      - {{type: contains, config: {{path: env.txt, pattern: "this is never there"}}}}
      - {{type: contains, config: {{name: result, pattern: "this is never there"}}}}
"""


def atp(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args], cwd=cwd, env={**env, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module", params=sorted(SCHEMES))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    transport = request.param
    if transport == "websocket":
        pytest.importorskip("websockets", reason="the websocket adapter needs the websockets package")
    if transport == "grpc":
        pytest.importorskip("grpc", reason="the grpc adapter needs atp-adapters[grpc]")
    server = Server([PYTHON, str(AGENTS / "environment_agent.py"), transport])
    yield transport, server.port
    server.stop()


@pytest.fixture
def project(tmp_path: Path, served: tuple[str, int]) -> Path:
    transport, port = served
    write(
        tmp_path / "suite.yaml",
        SUITE.format(transport=transport, scheme=SCHEMES[transport], port=port, digest=DIGEST),
    )
    return tmp_path


def without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("ATP_E2E_TOKEN", "MY_SERVICE_TOKEN")}


def written(project: Path) -> dict[str, str]:
    """Every file ATP wrote in the project (the suite aside), by path."""
    return {
        str(path.relative_to(project)): path.read_text(errors="replace")
        for path in project.rglob("*")
        if path.is_file() and path.name != "suite.yaml"
    }


def test_the_secret_reaches_the_agent_and_no_output(project: Path, served: tuple[str, int]) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=agent",
        "--verbose",
        "--output=console,json:results.json,html:report.html,junit:report.xml",
        cwd=project,
        env={**without_token(), "ATP_E2E_TOKEN": TOKEN},
    )
    assert result.returncode == 1, result.stdout + result.stderr  # quotes_the_token fails, as it must
    assert "Traceback" not in result.stdout + result.stderr
    runs = {t["id"]: t["runs"][0] for t in json.loads((project / "results.json").read_text())["tests"]}
    # The agent got the token (its SHA-256) and the plain value, in context.environment.
    assert runs["uses_the_token"]["outcome"] == "passed", runs["uses_the_token"]
    assert runs["quotes_the_token"]["outcome"] == "failed"
    files = written(project)
    assert {"results.json", "report.html", "report.xml"} <= set(files)
    assert any(name.endswith("results.jsonl") for name in files)
    for name, text in {"stdout": result.stdout, "stderr": result.stderr, **files}.items():
        assert TOKEN not in text, name
        assert TOKEN[4:-4] not in text, name  # (no part of it either)
    # What the agent quoted is there, masked: the failing checks quote its file and its result.
    for name in ("results.json", "report.xml"):
        assert "token=***" in files[name] and re.search(r'token\\?": \\?"\*\*\*', files[name]), name
    assert "token=***" in result.stdout
    if served[0] != "http":  # (the http agent answers at once, without events)
        events = "".join(text for name, text in files.items() if "/events/" in name)
        assert "calling the service with ***" in events


def test_a_secret_under_another_name(project: Path) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=renamed",
        "--test=uses_the_token",
        "--output=console,json:results.json",
        cwd=project,
        env={**without_token(), "MY_SERVICE_TOKEN": TOKEN},
    )
    [test] = json.loads((project / "results.json").read_text())["tests"]
    [check, region] = test["runs"][0]["checks"]
    assert check["passed"], result.stdout + result.stderr  # it got the token
    assert not region["passed"]  # and no REGION: this agent sends no plain values
    assert TOKEN not in result.stdout + result.stderr + (project / "results.json").read_text()


def test_an_agent_without_secrets_sends_none(project: Path) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=without",
        "--test=uses_the_token",
        "--output=json:results.json",
        cwd=project,
        env={**without_token(), "ATP_E2E_TOKEN": TOKEN},
    )
    assert result.returncode == 1
    [test] = json.loads((project / "results.json").read_text())["tests"]
    assert "no token in context.environment" in test["runs"][0]["error"]


def test_a_secret_not_set_is_an_error_naming_the_agent_and_the_variable(project: Path) -> None:
    result = atp("test", "--suite=suite.yaml", "--agent=renamed", cwd=project, env=without_token())
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(result.stderr, "suite.yaml", "agents[1].secrets", "'renamed'", "MY_SERVICE_TOKEN", "not set")
    assert not (project / ".atp").exists()  # refused before any run


def test_validate_probes_with_the_agents_environment(project: Path, served: tuple[str, int]) -> None:
    """`atp validate suite.yaml` sends the suite's task with the agent's context.environment,
    as `atp test` does: the agent that needs its token answers the probe, and the token is
    shown nowhere."""
    # (the http agent has no GET handler: its 501 for GET /health says it has no health endpoint)
    result = atp(
        "validate",
        "suite.yaml",
        "--agent=agent",
        cwd=project,
        env={**without_token(), "ATP_E2E_TOKEN": TOKEN},
    )
    assert re.search(r"PASS +answers a probe +status completed", result.stdout), result.stdout + result.stderr
    assert TOKEN not in result.stdout + result.stderr and TOKEN[4:-4] not in result.stdout + result.stderr
    # the same agent without its secret: the probe's answer is a failure
    bare = atp("validate", "suite.yaml", "--agent=without", cwd=project, env=without_token())
    assert re.search(r"FAIL +answers a probe", bare.stdout), bare.stdout + bare.stderr
