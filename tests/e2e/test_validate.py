"""`atp validate` as a user runs it: the real command against real agents (the bundled examples,
the `atp init` agent, a `python` agent, and tests/agents/validate_agents.py getting ATP wrong)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, EXAMPLES, PYTHON, write
from tests.facts import one_error, says

QUICKSTART = EXAMPLES / "quickstart" / "suite.yaml"
TITLES = {
    "reachable": "reachable",
    "probe": "answers a probe",
    "events": "events",
    "malformed": "refuses a malformed request",
    "version": "refuses major version 2",
}
LABELS = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}
SECRET = "sk-validate-0123456789"


def validate(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    full_env.pop("PYTHONPATH", None)  # a python agent's module is found through its suite's folder
    return subprocess.run(
        [ATP, "validate", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def outcomes(stdout: str) -> dict[str, str]:
    """Each check's outcome, by name, from the lines `atp validate` printed."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition("  ")
        if label not in LABELS:
            continue
        name = next(
            n for n, title in sorted(TITLES.items(), key=lambda t: -len(t[1])) if rest.startswith(title)
        )
        assert name not in found, stdout
        found[name] = LABELS[label]
    return found


def line_of(stdout: str, name: str) -> str:
    """The line of check ``name`` and the lines under it (seen, fix, note)."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        label, _, rest = line.partition("  ")
        if label in LABELS and rest.startswith(TITLES[name] + " "):
            block = [line]
            for more in lines[index + 1 :]:
                if not more.startswith("      "):
                    break
                block.append(more.strip())
            return "\n".join(block)
    raise AssertionError(f"no line for check {name!r} in:\n{stdout}")


def assert_speaks_atp(result: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, every check listed and passed (for any agent type, whatever its transport)."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcomes(result.stdout) == dict.fromkeys(TITLES, "passed"), result.stdout
    assert result.stdout.rstrip().endswith("speaks ATP."), result.stdout
    assert "Traceback" not in result.stderr


def agents_suite(tmp_path: Path, *modes: str, extra: str = "") -> Path:
    """A suite defining one cli agent per mode of tests/agents/validate_agents.py."""
    agents = "".join(
        f"  - name: {mode}\n    type: cli\n"
        f"    command: {[PYTHON, str(AGENTS / 'validate_agents.py'), mode]!r}\n"
        f"    grace_seconds: 1\n"
        for mode in modes
    )
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: validate\nagents:\n{agents}{extra}tests:\n  - id: t\n    task: {{description: x}}\n",
    )


# --- agents that speak ATP ---------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["research-agent", "minimal-agent", "research-agent-persistent"])
def test_the_example_agents_pass(tmp_path: Path, agent: str) -> None:
    result = validate(str(QUICKSTART), f"--agent={agent}", cwd=tmp_path)
    assert_speaks_atp(result)
    says(result.stdout.splitlines()[0], f"Agent: {agent}", "(cli)", "30 s")
    says(line_of(result.stdout, "malformed"), "status failed", "error_code INVALID_REQUEST")
    says(line_of(result.stdout, "version"), "status failed", "error_code INVALID_REQUEST")
    assert result.stdout.splitlines()[1] == (
        "Probe: the task of test 'answers_at_all' of suite 'competitor_analysis'"
    )
    events = 2 if agent == "minimal-agent" else 8  # (the research agent, given the test's company)
    says(line_of(result.stdout, "events"), f"{events} valid events", f"0 to {events - 1}")


def test_the_agent_atp_init_writes_passes(tmp_path: Path) -> None:
    done = subprocess.run([ATP, "init"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    result = validate(cwd=tmp_path)  # the one agent of atp.config.yaml
    assert_speaks_atp(result)
    says(result.stdout.splitlines()[0], "Agent: my-agent", "(cli)")


def test_a_python_agent_passes_and_its_adapter_refuses_bad_requests_itself(tmp_path: Path) -> None:
    suite = agents_suite(
        tmp_path,
        extra=f"  - name: function\n    type: python\n    callable: validate_agents:run\n"
        f"    path: [{str(AGENTS)!r}]\n",
    )
    result = validate(str(suite), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["agent"] == "function" and document["type"] == "python" and document["ok"] is True
    checks = {c["name"]: c for c in document["checks"]}
    assert list(checks) == list(TITLES)
    assert all(c["outcome"] == "passed" for c in checks.values())
    says(checks["events"]["summary"], "1 valid event", "sequence 0")
    says(checks["malformed"]["summary"], "adapter", "refuses")
    assert "$.task.description" in checks["malformed"]["notes"][0]
    says(checks["version"]["notes"][0], "version 2.0")


def test_a_good_agent_passes_with_the_suite_given_by_option(tmp_path: Path) -> None:
    suite = agents_suite(tmp_path, "good")
    result = validate(f"--suite={suite}", "--timeout=5", cwd=tmp_path)
    assert_speaks_atp(result)
    says(result.stdout.splitlines()[0], "5 s")


# --- agents that do not ------------------------------------------------------------------------


def test_a_response_without_task_id_fails_naming_task_id(tmp_path: Path) -> None:
    result = validate(str(agents_suite(tmp_path, "no_task_id")), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout)["probe"] == "failed"
    probe = line_of(result.stdout, "probe")
    says(probe, "no task_id")
    says(probe, "missing required field `task_id`")  # what the decoder said, passed on whole
    says(probe, "fix:", "echo", "task_id", "every response and event")
    assert "Traceback" not in result.stderr


def test_an_agent_accepting_version_2_fails_that_check_only(tmp_path: Path) -> None:
    result = validate(str(agents_suite(tmp_path, "accepts_v2")), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout) == {**dict.fromkeys(TITLES, "passed"), "version": "failed"}
    version = line_of(result.stdout, "version")
    says(version, "status completed", "version 2.0", "unsupported major version")
    says(result.stdout, "Checks:", "4 passed", "1 failed", "of 5")


def test_an_agent_hanging_on_a_malformed_request_fails_within_the_timeout(tmp_path: Path) -> None:
    result = validate(
        str(agents_suite(tmp_path, "hangs_on_malformed")), "--timeout=2", cwd=tmp_path, timeout=60
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout) == {**dict.fromkeys(TITLES, "passed"), "malformed": "failed"}
    malformed = line_of(result.stdout, "malformed")
    says(malformed, "2 s", "hang")


def test_an_agent_that_cannot_start_fails_reachable_and_skips_the_rest(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        "test_suite: v\nagents:\n"
        f"  - {{name: gone, type: cli, command: [{str(tmp_path / 'no-such-agent')!r}]}}\n"
        "tests:\n  - id: t\n    task: {description: x}\n",
    )
    result = validate(str(suite), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert outcomes(result.stdout) == {**dict.fromkeys(TITLES, "skipped"), "reachable": "failed"}
    says(line_of(result.stdout, "reachable"), "agent 'gone'", tmp_path / "no-such-agent", "does not exist")
    says(line_of(result.stdout, "probe"), "not reachable")


def test_an_http_agent_nothing_answers_for_is_said_to_be_unreachable(tmp_path: Path) -> None:
    """The http adapter tells an agent it cannot reach (start it) from one that fails its health
    check; its wording was "says it is unhealthy ... make the agent healthy" for both."""
    from tests.network import free_port

    port = free_port()
    suite = write(
        tmp_path / "suite.yaml",
        "test_suite: v\nagents:\n"
        f"  - {{name: web, type: http, endpoint: 'http://127.0.0.1:{port}/run'}}\n"
        "tests:\n  - id: t\n    task: {description: x}\n",
    )
    result = validate(str(suite), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    reachable = line_of(result.stdout, "reachable")
    says(reachable, "health check", "cannot reach")
    says(reachable, "seen:", "agent 'web'", f"http://127.0.0.1:{port}/run/health", "connection refused")
    says(reachable, "fix:", "start the agent")
    says(line_of(result.stdout, "probe"), "not reachable")


def test_an_adapter_with_the_default_health_keeps_its_wording() -> None:
    """An adapter that only says yes or no (its health_check; the default health()) cannot tell
    an agent it cannot reach from an unhealthy one: `atp validate` says what it always said."""
    import anyio

    from atp.core.adapter import Adapter
    from atp.core.secrets import Masker
    from atp.core.validation import Validation

    class Sulking(Adapter):
        type = "sulking"

        async def health_check(self) -> bool:
            return False

        async def execute(self, request: object, sink: object) -> object:  # type: ignore[override]
            raise AssertionError("not sent: the agent is not healthy")

    validation = Validation(
        lambda: Sulking(None, name="a", base_dir=Path(".")),
        "sulking",
        timeout=5,
        masker=Masker(),
        report=lambda _: None,
    )
    reachable, *rest = anyio.run(validation.run)
    assert (reachable.name, reachable.outcome) == ("reachable", "failed")
    # exact: that this adapter keeps the wording it always had is the point of the test
    assert reachable.summary == "the agent's health check says it is not healthy"
    assert reachable.fix == "start the agent (or wait until it is ready), then validate it again"
    assert [r.outcome for r in rest] == ["skipped"] * 4


def test_events_out_of_order_fail_the_events_check_saying_where(tmp_path: Path) -> None:
    result = validate(str(agents_suite(tmp_path, "out_of_order")), "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    checks = {c["name"]: c for c in document["checks"]}
    assert [n for n, c in checks.items() if c["outcome"] == "failed"] == ["events"]
    events = checks["events"]
    says(events["summary"], "sequence numbers", "increase")
    [seen] = events["seen"]
    says(seen, "event 3", "(progress)", "sequence 1", "after 2")
    says(events["fix"], "0, 1, 2")


def test_a_failed_answer_to_the_probe_shows_its_error_masked_and_escaped(tmp_path: Path) -> None:
    suite = agents_suite(tmp_path, "fails")
    suite.write_text(
        suite.read_text().replace(
            "    grace_seconds: 1\n", "    grace_seconds: 1\n    env: {API_TOKEN: '${API_TOKEN}'}\n"
        )
    )
    result = validate(str(suite), cwd=tmp_path, env={"API_TOKEN": SECRET})
    assert result.returncode == 1, result.stdout + result.stderr
    probe = line_of(result.stdout, "probe")
    says(probe, "valid request", "status failed")
    # exact: the secret masked as *** and the escape sequence shown as \\e[2J are the point
    assert "seen: status failed, error: the service refused token *** \\e[2J" in probe
    assert SECRET not in result.stdout + result.stderr
    assert "\x1b" not in result.stdout


def test_ctrl_c_stops_the_agent_and_exits_130(tmp_path: Path) -> None:
    suite = agents_suite(tmp_path, "hangs")
    pid_file = tmp_path / "pid"
    env = {**os.environ, "NO_COLOR": "1", "AGENT_PID_FILE": str(pid_file)}
    process = subprocess.Popen(
        [ATP, "validate", str(suite)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        agent = int(pid_file.read_text())
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stdout + stderr
    assert outcomes(stdout) == {"reachable": "passed"}
    assert "4 not run" in stdout and "Interrupted" in stderr
    deadline = time.monotonic() + 5
    while _running(agent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(agent)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


# --- usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "one_line", "facts"),
    [
        (["--agent=nobody"], True, ("'nobody'", "accepts_v2, good")),
        ([], True, ("--agent", "accepts_v2, good")),
        (["--agent=good", "--timeout=0"], False, ("'--timeout'", "'0'", "above 0", "3600")),  # a usage error
        (["--agent=good", "--suite=other.yaml"], False, ("SUITE", "--suite")),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(
    tmp_path: Path, args: list[str], one_line: bool, facts: tuple[str, ...]
) -> None:
    suite = agents_suite(tmp_path, "good", "accepts_v2")
    result = validate(str(suite), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    if one_line:
        one_error(result.stderr, *facts)
    else:  # the last line, under click's usage lines
        says(result.stderr.splitlines()[-1], "Error:", *facts)
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_a_missing_suite_or_no_agent_at_all_exits_2(tmp_path: Path) -> None:
    result = validate(str(tmp_path / "missing.yaml"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    one_error(result.stderr, tmp_path / "missing.yaml")
    result = validate(cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, "no agent", "'agents'", "atp.config.yaml")
