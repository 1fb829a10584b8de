"""`atp test` with an agent that cannot start at all, or that ends without a response, as a user
runs it: the real `atp` command in a folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.conftest import ATP, PYTHON, write
from tests.facts import one_error, says


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def suite(tmp_path: Path, agent: str, tests: int = 3) -> Path:
    body = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(tests))
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: start\nagents:\n  - name: my-agent\n    type: cli\n{agent}tests:\n{body}",
    )


def test_a_command_not_found_is_one_error_before_any_run(tmp_path: Path) -> None:
    path = suite(tmp_path, "    command: [no-such-agent-binary, --serve]\n    env: {PATH: /usr/bin:/bin}\n")
    started = time.monotonic()
    result = atp("test", f"--suite={path}", cwd=tmp_path)
    assert time.monotonic() - started < 30
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(
        result.stderr,
        "agent 'my-agent'",
        "cannot start 'no-such-agent-binary --serve'",
        "'no-such-agent-binary' is not found on PATH",
        "/usr/bin:/bin",
    )
    assert "Traceback" not in result.stderr and "✗" not in result.stdout
    assert not list(tmp_path.glob(".atp/runs/*/results.jsonl")) or all(
        not f.read_text() for f in tmp_path.glob(".atp/runs/*/results.jsonl")
    )


def test_a_script_that_is_not_executable_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("print('hi')\n")
    path = suite(tmp_path, "    command: ./agent.py\n")
    result = atp("test", f"--suite={path}", cwd=tmp_path)
    assert result.returncode == 2
    one_error(
        result.stderr,
        "agent 'my-agent'",
        "cannot start './agent.py'",
        f"{tmp_path}/agent.py is not executable",
        "chmod +x",
        "interpreter first in 'command'",
    )


def test_a_missing_working_folder_is_one_error(tmp_path: Path) -> None:
    path = suite(tmp_path, f"    command: [{PYTHON}, a.py]\n    cwd: work\n")
    result = atp("test", f"--suite={path}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith(f": its working folder {tmp_path}/work does not exist")


def test_a_missing_script_fails_each_run_with_the_interpreters_words(tmp_path: Path) -> None:
    """The interpreter starts (this is not a command that cannot start): each run fails, and its
    reason quotes the end of the agent's stderr without -v."""
    path = suite(tmp_path, f"    command: {PYTHON}\n    args: [agent.py]\n", tests=1)
    result = atp("test", f"--suite={path}", "--output=json", "--output-file=results.json", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    run = json.loads((tmp_path / "results.json").read_text())["tests"][0]["runs"][0]
    # the run's own folder was its working folder (agent.py is in neither): the reason says
    # so, where the agent's cwd is, and how to run in it
    (folder,) = (run_dir / "workspaces" for run_dir in (tmp_path / ".atp" / "runs").iterdir())
    says(
        run["error"],
        "agent exited with code 2 without writing a response on stdout",
        f"{PYTHON}: can't open file '{folder}/",
        f"not in the agent's cwd ({tmp_path}, given to it as $ATP_AGENT_DIR)",
        "'working_folder: shared'",
    )
    console = atp("test", f"--suite={path}", cwd=tmp_path)
    assert console.returncode == 1
    assert "can't open file" in console.stdout and "'working_folder: shared'" in console.stdout


def test_a_program_path_in_the_suites_folder_resolves_once_from_any_working_folder(tmp_path: Path) -> None:
    """`command: ./agent` (or `bin/agent`) is relative to the suite's folder, resolved once: with
    a relative or an absolute --suite, from another working folder, the agent starts."""
    project = tmp_path / "project" / "suites"
    (project / "bin").mkdir(parents=True)
    agent = (
        f"#!{PYTHON}\nimport json, sys\nrequest = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'version': '1.0', 'task_id': request['task_id'], 'status': 'completed', 'artifacts': [], 'metrics': {}}))\n"
    )
    for name in ("agent", "bin/agent"):
        write(project / name, agent).chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for program in ("./agent", "bin/agent"):
        path = suite(project, f"    command: {program}\n", tests=1)
        for argument, cwd in (
            ("project/suites/suite.yaml", tmp_path),  # relative, from above the suite's folder
            ("../project/suites/suite.yaml", elsewhere),  # relative, from a sibling folder
            (str(path), elsewhere),  # absolute
        ):
            result = atp("test", f"--suite={argument}", cwd=cwd)
            assert result.returncode == 0, (program, argument, result.stdout + result.stderr)
