"""The cli adapter: a command that cannot start stops the suite before any run; an agent that
ends without a response shows the end of its stderr; ``args:`` beside ``command:``; responses
printed as multi-line JSON."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.adapters.cli import CliAdapter, CliSettings
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Task
from atp.core.results import SuiteResults
from atp.core.runner import Runner
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from tests.conftest import AGENTS, PYTHON, behave_agent, write


class Sink:
    masker = None

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.warnings: list[str] = []

    def event(self, event: Any, raw: bytes | None = None) -> None:
        pass

    def events(self, events: Any, raw: bytes | None = None) -> None:
        pass

    def log(self, line: str) -> None:
        self.logs.append(line)

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def request() -> ATPRequest:
    return ATPRequest(version="1.0", task_id=str(uuid.uuid4()), task=Task(description="x"))


def run_agent(tmp_path: Path, plugins: Plugins, agent: str, masker: Masker | None = None) -> SuiteResults:
    """One test against the agent whose settings are the YAML lines ``agent``."""
    text = (
        "test_suite: s\nagents:\n  - name: agent\n    type: cli\n    grace_seconds: 1\n"
        f"    working_folder: per-run\n{agent}"  # (written: no note on the default in the reason)
        "tests:\n  - id: t\n    task: {description: x}\n    constraints: {timeout_seconds: 30}\n"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    resolved = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, resolved, run_root=tmp_path / "runs", masker=masker)
    return anyio.run(runner.run)


def behave(tmp_path: Path, plugins: Plugins, mode: str, masker: Masker | None = None) -> Any:
    results = run_agent(tmp_path, plugins, f"    command: {behave_agent(mode)!r}\n", masker)
    return results.tests[0].runs[0]


# --- the command cannot start: one error, before any run -----------------------------------------


def start_problem(tmp_path: Path, **settings: Any) -> str:
    adapter = CliAdapter(CliSettings(**settings), name="my-agent", base_dir=tmp_path)
    with pytest.raises(AdapterError) as info:
        anyio.run(adapter.start)
    return str(info.value)


def test_a_program_not_on_path_is_named_with_the_path(tmp_path: Path) -> None:
    message = start_problem(tmp_path, command="no-such-agent --fast", env={"PATH": "/nowhere:/bin"})
    assert message == (
        "agent 'my-agent': cannot start 'no-such-agent --fast': 'no-such-agent' is not found on PATH "
        "(/nowhere:/bin)"
    )


def test_a_program_in_the_working_folder_needs_a_path(tmp_path: Path) -> None:
    (tmp_path / "agent.sh").write_text("#!/bin/sh\n")
    message = start_problem(tmp_path, command=["agent.sh"], env={"PATH": "/bin"})
    assert message.endswith(f"; the working folder {tmp_path} has agent.sh: write ./agent.sh to run it")


@pytest.mark.parametrize(
    ("setup", "command", "cwd", "problem"),
    [
        (None, ["./missing.sh"], None, "{tmp}/missing.sh does not exist"),
        (
            "plain",
            ["./agent.sh"],
            None,
            "{tmp}/agent.sh is not executable (chmod +x it, or put its interpreter first in 'command')",
        ),
        ("folder", ["./agent.sh"], None, "{tmp}/agent.sh is a folder, not a program"),
        (
            "bad_interpreter",
            ["./agent.sh"],
            None,
            "{tmp}/agent.sh names the interpreter /no/such/sh on its first line, which does not exist",
        ),
        (None, [PYTHON, "agent.py"], "gone", "its working folder {tmp}/gone does not exist"),
        ("plain", [PYTHON, "agent.py"], "agent.sh", "its working folder {tmp}/agent.sh is not a folder"),
        ("plain", ["./agent.sh/run"], None, "{tmp}/agent.sh/run: Not a directory"),
    ],
)
def test_what_cannot_start_is_said_precisely(
    tmp_path: Path, setup: str | None, command: list[str], cwd: str | None, problem: str
) -> None:
    script = tmp_path / "agent.sh"
    if setup == "plain":
        script.write_text("#!/bin/sh\necho\n")
    elif setup == "folder":
        script.mkdir()
    elif setup == "bad_interpreter":
        script.write_text("#!/no/such/sh -e\necho\n")
        script.chmod(0o755)
    message = start_problem(tmp_path, command=command, cwd=cwd)
    assert message.startswith("agent 'my-agent': cannot start ")
    assert message.endswith(": " + problem.format(tmp=tmp_path)), message


def test_what_can_start_passes_the_check(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "agent"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho\n")
    script.chmod(0o755)
    for settings in (
        {"command": ["./bin/agent"]},
        {"command": "agent", "env": {"PATH": "bin"}},  # a relative PATH entry: the agent's cwd
        {"command": [PYTHON, "missing.py"]},  # the interpreter starts: the run will say the rest
        {"command": "sh -c true", "inherit_env": False},  # no PATH at all: the system's default
    ):
        anyio.run(CliAdapter(CliSettings(**settings), name="a", base_dir=tmp_path).start)


def test_command_gone_after_the_start_makes_the_run_an_error(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    adapter = CliAdapter(CliSettings(command=["./agent.sh"]), name="a", base_dir=tmp_path)
    anyio.run(adapter.start)
    script.unlink()
    gone = r"agent 'a': cannot start .*agent\.sh' in .*: No such file or directory"
    with pytest.raises(AdapterError, match=gone):
        anyio.run(adapter.execute, request(), Sink())


# --- an agent that ends without a response: the end of its stderr --------------------------------


def test_a_missing_script_shows_the_interpreters_complaint(tmp_path: Path, plugins: Plugins) -> None:
    missing = tmp_path / "agent.py"
    run = run_agent(tmp_path, plugins, f"    command: {[PYTHON, str(missing)]!r}\n").tests[0].runs[0]
    assert run.outcome == "failed"
    assert run.error == (
        "agent exited with code 2 without writing a response on stdout; its stderr ends with: "
        f"'{PYTHON}: can't open file '{missing}': [Errno 2] No such file or directory'"
    )


def test_a_crash_shows_the_end_of_its_traceback(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "crash")
    assert run.error == (
        "agent exited with code 3 without writing a response on stdout; its stderr ends with: "
        "'Traceback (most recent call last):\\n  ...\\nRuntimeError: the agent broke'"
    )


def test_the_stderr_quoted_is_bounded_and_ends_with_the_last_line(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "long_stderr")
    assert run.error.startswith(
        "agent exited with code 1 without writing a response on stdout; its stderr ends with: '"
    )
    quoted = run.error.split("its stderr ends with: ", 1)[1]
    assert quoted.endswith("\\nFinalError: the last line'") and len(quoted) < 250
    assert quoted.count("\\n") == 2  # the lines that fit in a preview, of the last 5


def test_the_stderr_quoted_is_masked(
    tmp_path: Path, plugins: Plugins, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_SECRET", "s3cr3t-value-123")
    run = behave(tmp_path, plugins, "secret_stderr", Masker(["s3cr3t-value-123"]))
    assert run.error.endswith("its stderr ends with: 'the key is *** and it is wrong'")


def test_garbage_on_stdout_shows_the_end_of_stderr_too(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "stderr_garbage")
    assert run.error.startswith(
        "agent exited with code 1 (its stderr ends with 'loading the model\\nboom: the model is missing'); "
        "its last stdout line is not an ATP response (ATP response is not valid JSON"
    )
    assert run.error.endswith("(stdout line 1, byte offset 0): 'Hello! I am definitely not JSON.'")


def test_an_agent_with_a_response_gets_no_stderr_in_its_reason(tmp_path: Path) -> None:
    code = "import sys; print('chatty', file=sys.stderr); sys.stdin.readline(); sys.exit(3)"
    adapter = CliAdapter(CliSettings(command=[PYTHON, "-c", code]), name="a", base_dir=tmp_path)
    with pytest.raises(AgentError) as info:
        anyio.run(adapter.execute, request(), Sink())
    assert info.value.evidence == "chatty"


# --- args: beside command: ---------------------------------------------------------------------


def test_args_follow_the_command(tmp_path: Path, plugins: Plugins) -> None:
    assert CliAdapter(
        CliSettings(command="python3", args=["agent.py", "--flag"]), name="a", base_dir=tmp_path
    ).argv == ["python3", "agent.py", "--flag"]
    assert CliAdapter(
        CliSettings(command=["python3", "-u"], args=["agent.py"]), name="a", base_dir=tmp_path
    ).argv == ["python3", "-u", "agent.py"]
    assert CliAdapter(
        CliSettings(command="python3 -u", args=["a b.py"]), name="a", base_dir=tmp_path
    ).argv == ["python3", "-u", "a b.py"]
    agent = f"    command: {PYTHON}\n    args: [{str(AGENTS / 'behave.py')!r}, ok]\n"
    run = run_agent(tmp_path, plugins, agent).tests[0].runs[0]
    assert run.outcome == "passed", run.error


def test_args_are_checked_like_the_command(tmp_path: Path, plugins: Plugins) -> None:
    with pytest.raises(SuiteError, match=r"'args\[1\]' holds a NUL byte") as info:
        run_agent(tmp_path, plugins, '    command: python3\n    args: [a, "b\\0"]\n')
    assert info.value.path == "agents[0]"
    with pytest.raises(SuiteError, match="'command' is empty"):
        run_agent(tmp_path, plugins, '    command: ""\n    args: [agent.py]\n')
    with pytest.raises(SuiteError, match="expected array, got str"):
        run_agent(tmp_path, plugins, "    command: python3\n    args: agent.py\n")


# --- a response printed as multi-line JSON -------------------------------------------------------


def test_a_pretty_printed_response_is_read(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "pretty")
    assert run.outcome == "passed" and run.warnings == [], (run.error, run.warnings)
    assert run.artifacts[0].data == {"ok": True}


def test_lines_before_a_pretty_printed_response_are_log(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "pretty_after_log")
    assert run.outcome == "passed", run.error
    assert run.warnings == [
        "2 stdout lines before the response were kept as the agent's log; stdout is for the response: "
        "write logs to stderr"
    ]


def test_a_pretty_printed_response_with_a_wrong_field_names_it(tmp_path: Path, plugins: Plugins) -> None:
    run = behave(tmp_path, plugins, "pretty_invalid")
    assert run.outcome == "failed"
    assert run.error.startswith(
        "agent exited with code 0; its stdout, read as one multi-line JSON message, is not an ATP response "
        "(ATP response: Expected `str`, got `int` - at `$.status`) (stdout line 1, byte offset 0): "
        '\'{\\n  "version"'
    )


def test_a_pretty_printed_response_of_an_agent_that_runs_on_is_taken(
    tmp_path: Path, plugins: Plugins
) -> None:
    started = time.monotonic()
    run = behave(tmp_path, plugins, "pretty_lingering")
    assert run.outcome == "passed", run.error
    assert time.monotonic() - started < 10
    assert run.warnings[0].startswith("the agent kept running after its response")


def test_a_pretty_printed_response_is_read_by_the_adapter(tmp_path: Path) -> None:
    adapter = CliAdapter(CliSettings(command=behave_agent("pretty")), name="a", base_dir=tmp_path)
    sent = request()
    response = anyio.run(adapter.execute, sent, Sink())
    assert response.task_id == sent.task_id and response.status == "completed"


def test_the_last_line_still_wins_over_earlier_json(tmp_path: Path) -> None:
    """A response on the last line is the response, whatever multi-line JSON came before it."""
    code = (
        "import json, sys; r = json.loads(sys.stdin.readline()); "
        "print(json.dumps({'debug': 1}, indent=2)); "
        "print(json.dumps({'version': '1.0', 'task_id': r['task_id'], 'status': 'completed', "
        "'artifacts': [], 'metrics': {}}))"
    )
    adapter = CliAdapter(CliSettings(command=[PYTHON, "-c", code]), name="a", base_dir=tmp_path)
    sink = Sink()
    response = anyio.run(adapter.execute, request(), sink)
    assert response.status == "completed"
    assert sink.warnings == [
        "3 stdout lines before the response were kept as the agent's log; stdout is for the response: "
        "write logs to stderr"
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux path")
def test_start_uses_the_agents_own_path(tmp_path: Path) -> None:
    settings = CliSettings(command="true", env={"PATH": str(tmp_path)})
    adapter = CliAdapter(settings, name="a", base_dir=tmp_path)
    with pytest.raises(AdapterError, match=f"'true' is not found on PATH \\({tmp_path}\\)"):
        anyio.run(adapter.start)
    assert os.environ.get("PATH")  # (ATP's own PATH has it)
