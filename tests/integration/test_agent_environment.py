"""An agent's ``secrets:`` and ``env`` through the Runner for the adapters that carry
``context.environment`` their own way: a ``cli`` agent (in the request on stdin, and in its
process's environment), a ``term-sdk`` agent (whose ``POST /start`` has no place for it: in the
environment of the process started for the run) and an ``agent-interface`` agent (in the
``context`` of its A2A message). The secret is read from another variable (``{ATP_E2E_TOKEN:
SOURCE}``), so that an agent inheriting ATP's environment cannot have it by chance."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from atp.core.plugins import Plugins
from tests.conftest import AGENTS, PYTHON, write
from tests.network import Server, run_agent_suite, runs_by_test

TOKEN = "tok-0d15ea5e-never-shown"
DIGEST = hashlib.sha256(TOKEN.encode()).hexdigest()
SECRETS = "    secrets: {ATP_E2E_TOKEN: ATP_TEST_SOURCE}\n"

CLI_AGENT = """
import hashlib, json, os, sys
request = json.loads(sys.stdin.readline())
sent = (request.get("context") or {}).get("environment") or {}
def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()
text = "request=%s\\nprocess=%s\\nregion=%s\\n" % (
    sha(sent.get("ATP_E2E_TOKEN", "")), sha(os.environ.get("ATP_E2E_TOKEN", "")), sent.get("REGION")
)
print("the token is " + sent.get("ATP_E2E_TOKEN", ""), file=sys.stderr)
print(json.dumps({"version": "1.0", "task_id": request["task_id"], "status": "completed",
    "artifacts": [{"type": "file", "path": "env.txt", "content": text}], "metrics": {}}))
"""


@pytest.fixture(autouse=True)
def source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATP_E2E_TOKEN", raising=False)
    monkeypatch.setenv("ATP_TEST_SOURCE", TOKEN)


def test_a_cli_agent_gets_its_secrets_in_the_request_and_its_environment(
    tmp_path: Path, plugins: Plugins
) -> None:
    write(tmp_path / "agent.py", CLI_AGENT)
    settings = f"    command: [{json.dumps(PYTHON)}, agent.py]\n{SECRETS}"
    tests = (
        "  - id: env\n"
        "    task: {description: go}\n"
        "    assertions:\n"
        f"      - {{type: contains, config: {{path: env.txt, pattern: 'request={DIGEST}'}}}}\n"
        f"      - {{type: contains, config: {{path: env.txt, pattern: 'process={DIGEST}'}}}}\n"
    )
    results, store = run_agent_suite("cli", tmp_path, plugins, settings, tests)
    run = runs_by_test(results)["env"]
    assert run.outcome == "passed", (run.error, run.checks)
    log = (store.directory / run.log_file).read_text()
    assert "the token is ***" in log and TOKEN not in log


def test_a_term_sdk_agent_gets_its_secrets_in_the_environment_of_its_process(
    tmp_path: Path, plugins: Plugins
) -> None:
    settings = f"    command: {json.dumps([PYTHON, str(AGENTS / 'term_sdk_agent.py')])}\n{SECRETS}"
    tests = (
        "  - id: env\n"
        "    task: {description: 'environ: show what you got'}\n"
        "    assertions:\n"
        f"      - {{type: contains, config: {{path: environ.txt, pattern: 'sha256={DIGEST}'}}}}\n"
        # The SDK's POST /start is sent as the SDK defines it, nothing added.
        "      - {type: contains, config: {path: environ.txt, pattern: \"start=['instruction', 'max_steps', 'timeout_secs']\"}}\n"
    )
    results, store = run_agent_suite("term-sdk", tmp_path, plugins, settings, tests)
    run = runs_by_test(results)["env"]
    assert run.outcome == "passed", (run.error, run.checks)
    events = (store.directory / run.events_file).read_text()
    assert "token=***" in events and TOKEN not in events  # (the agent's `cat environ.txt`, masked)


def test_an_agent_interface_agent_gets_them_in_the_context_of_its_message(
    tmp_path: Path, plugins: Plugins
) -> None:
    pytest.importorskip("httpx", reason="the agent-interface adapter needs httpx")
    server = Server([PYTHON, str(AGENTS / "agent_interface_agent.py"), "--mode", "healthy"])
    try:
        settings = f"    endpoint: http://127.0.0.1:{server.port}\n{SECRETS}"
        tests = "  - id: hello\n    task: {description: hello}\n"
        results, _ = run_agent_suite("agent-interface", tmp_path, plugins, settings, tests)
    finally:
        server.stop()
    run = runs_by_test(results)["hello"]
    assert run.outcome == "passed", (run.error, run.checks)
    [artifact] = run.artifacts
    # (the agent echoes the context it got; ATP masks the secret in the result it keeps)
    # (this adapter's env is its started server's environment: not sent)
    assert artifact.data["context"]["environment"] == {"ATP_E2E_TOKEN": "***"}
    assert artifact.data["context"]["task_id"] == run.task_id
