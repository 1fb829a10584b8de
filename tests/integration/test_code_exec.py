"""The code-execution evaluators running real commands: pytest and ruff (installed in the dev
environment) over example artifacts (tests/fixtures/code_exec), commands that pass, fail,
hang, fork, detach and reach for the network."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.evaluator import EvalContext, Evaluator, checked_result
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse
from atp.core.results import Check
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from atp.evaluators import code_exec
from tests.conftest import FIXTURES, ROOT, write

CODE = FIXTURES / "code_exec"
GOOD = (CODE / "solution_good.py").read_text()
HALF = (CODE / "solution_half.py").read_text()
TESTS = (CODE / "tests_for_solution.py").read_text()
DIRTY = (CODE / "dirty.txt").read_text()
ISOLATION = anyio.run(code_exec.isolation)
needs_namespaces = pytest.mark.skipif(
    not ISOLATION.prefix, reason=f"no PID and network namespaces here: {ISOLATION.why}"
)


def ctx_for(resp: ATPResponse, workspace: Path | None = None) -> EvalContext:
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id=resp.task_id, task=test.task)
    return EvalContext(test=test, request=request, response=resp, trace=Trace.of([]), workspace=workspace)


def run_check(
    evaluator: type[Evaluator],
    config: dict[str, Any],
    resp: ATPResponse,
    *,
    workspace: Path | None = None,
    settings: dict[str, Any] | None = None,
) -> Check:
    """The one check of ``evaluator`` over ``resp``, its config validated as a suite's is."""
    import msgspec

    instance = evaluator(settings)
    parsed = msgspec.convert(config, instance.Config)

    async def evaluate() -> Any:
        return await instance.evaluate(ctx_for(resp, workspace), parsed)

    (check,) = checked_result(evaluator.name, anyio.run(evaluate))
    return check


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for whoever adopted it to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the commands' folders are made, to see that each is removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


# --- pytest ---------------------------------------------------------------------------------


def test_a_passing_solution_passes_with_score_1(temporary: Path) -> None:
    check = run_check(code_exec.Pytest, {"files": {"test_solution.py": TESTS}}, response(files={"solution.py": GOOD}))
    assert check.passed and check.score == 1.0, check.message
    assert check.name == "pytest" and check.message == "2 of 2 tests passed (100%)"
    details = check.details or {}
    assert details["tests"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert details["exit_code"] == 0 and "failures" not in details
    assert list(temporary.iterdir()) == []


def test_a_half_right_solution_scores_half_and_names_the_failed_test() -> None:
    config = {"path": "solution.py", "files": {"test_solution.py": TESTS}}
    check = run_check(code_exec.Pytest, config, response(files={"solution.py": HALF, "notes.md": "x"}))
    assert not check.passed and check.score == 0.5
    assert check.name == "pytest:solution.py"
    assert check.message == "1 of 2 tests passed (50%); failed: test_solution::test_sub (assert -2 == 2)"
    (failure,) = (check.details or {})["failures"]
    assert failure["test"] == "test_solution::test_sub"
    assert failure["message"].startswith("assert -2 == 2")
    assert "test_solution.py:9: AssertionError" in failure["text"]
    lenient = run_check(code_exec.Pytest, {**config, "min_pass_rate": 0.5}, response(files={"solution.py": HALF}))
    assert lenient.passed and lenient.score == 0.5
    assert lenient.message.startswith("1 of 2 tests passed (50%; min_pass_rate 50%); failed: test_solution::test_sub")


def test_the_suites_tests_win_over_the_agents() -> None:
    resp = response(files={"solution.py": HALF, "test_solution.py": "def test_nothing():\n    pass\n"})
    check = run_check(code_exec.Pytest, {"files": {"test_solution.py": TESTS}}, resp)
    assert not check.passed and (check.details or {})["replaced_by_suite_files"] == ["test_solution.py"]


def test_no_tests_a_collection_error_and_a_usage_error_fail_saying_so() -> None:
    none = run_check(code_exec.Pytest, {}, response(files={"solution.py": GOOD}))
    assert not none.passed and none.message == "pytest collected no tests (exit code 5)"
    broken = run_check(code_exec.Pytest, {"files": {"test_solution.py": TESTS}}, response(files={"other.py": GOOD}))
    assert not broken.passed
    assert broken.message == (
        "pytest could not collect the tests: collection error in test_solution "
        "(ModuleNotFoundError: No module named 'solution')"
    )
    usage = run_check(code_exec.Pytest, {"args": ["--no-such-option"]}, response(files={"solution.py": GOOD}))
    assert not usage.passed
    assert usage.message.startswith("pytest was used wrongly (usage error) (exit code 4) and wrote no JUnit report;")
    assert "unrecognized arguments: --no-such-option" in usage.message


def fake_python(tmp_path: Path, module: str) -> str:
    """An interpreter that has no ``module``, as ``python -m`` says it."""
    script = write(tmp_path / "bin" / "python", f"#!/bin/sh\necho \"$0: No module named {module}\" >&2\nexit 1\n")
    script.chmod(0o755)
    return str(script)


def test_pytest_not_installed_says_how_to_install_it(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "pytest")
    check = run_check(code_exec.Pytest, {}, response(files={"solution.py": GOOD}), settings={"python": python})
    assert not check.passed
    assert check.message == f"pytest is not installed for {python}; install it with: pip install 'atp-evaluators[code]'"


def test_with_a_workspace_pytest_runs_in_a_copy(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write(workspace / "solution.py", GOOD)
    write(workspace / "test_solution.py", TESTS + "\n\ndef test_writes():\n    open('solution.py', 'w').write('broken')\n")
    check = run_check(code_exec.Pytest, {}, response(files={}), workspace=workspace)
    assert check.passed and check.message == "3 of 3 tests passed (100%)", check.message
    assert (workspace / "solution.py").read_text() == GOOD


# --- lint -----------------------------------------------------------------------------------


def test_a_clean_file_passes_lint() -> None:
    check = run_check(code_exec.Lint, {"select": ["E", "F", "W"]}, response(files={"solution.py": GOOD, "notes.md": "x"}))
    assert check.passed and check.score == 1.0, check.message
    assert check.message == "no findings in solution.py"
    assert (check.details or {})["findings"] == [] and (check.details or {})["findings_total"] == 0


def test_a_dirty_file_fails_lint_with_its_findings_listed() -> None:
    resp = response(files={"solution.py": GOOD, "dirty.py": DIRTY})
    check = run_check(code_exec.Lint, {"select": ["F"]}, resp)
    assert not check.passed and check.score == 0.25
    assert check.message == (
        "3 findings in solution.py, dirty.py (max_findings 0): dirty.py:1:8 F401 `os` imported but unused; "
        "dirty.py:2:8 F401 `sys` imported but unused; "
        "dirty.py:6:5 F841 Local variable `unused` is assigned to but never used"
    )
    details = check.details or {}
    assert details["findings_total"] == 3
    assert details["findings"][0] == {
        "file": "dirty.py", "line": 1, "column": 8, "code": "F401", "message": "`os` imported but unused",
    }
    allowed = run_check(code_exec.Lint, {"select": ["F"], "max_findings": 3, "path": "dirty.py"}, resp)
    assert allowed.passed and allowed.message == "3 findings (max_findings 3) in dirty.py"
    ignored = run_check(code_exec.Lint, {"select": ["F"], "ignore": ["F401"]}, resp)
    assert (ignored.details or {})["findings_total"] == 1 and ignored.score == 0.5


def test_the_agent_cannot_loosen_its_own_lint() -> None:
    resp = response(files={"dirty.py": DIRTY, "ruff.toml": "[lint]\nignore = [\"F\"]\n", "pyproject.toml": "[tool.ruff]\nexclude = [\"*.py\"]\n"})
    check = run_check(code_exec.Lint, {"select": ["F"]}, resp)
    assert not check.passed and (check.details or {})["findings_total"] == 3


def test_lint_needs_a_python_file_and_ruff(tmp_path: Path) -> None:
    check = run_check(code_exec.Lint, {}, response(files={"report.md": "# hi"}))
    assert not check.passed and check.message == "expected a Python file to lint (*.py); the agent produced report.md"
    python = fake_python(tmp_path, "ruff")
    check = run_check(code_exec.Lint, {"python": python}, response(files={"a.py": GOOD}))
    assert check.message == f"ruff is not installed for {python}; install it with: pip install 'atp-evaluators[code]'"


# --- custom_command -------------------------------------------------------------------------


def test_a_command_passes_on_its_exit_code_and_regex() -> None:
    resp = response(files={"solution.py": GOOD})
    ok = run_check(
        code_exec.CustomCommand,
        {"command": "python -c 'import solution; print(solution.add(2, 3))'", "regex": "^5$"},
        resp,
    )
    assert ok.passed and ok.message == "python -c 'import solution; print(solution.add(2, 3))' exited with 0 and its output matches '^5$'"
    details = ok.details or {}
    assert details["exit_code"] == 0 and details["output"] == "5\n" and details["duration_seconds"] < 10
    mismatch = run_check(code_exec.CustomCommand, {"command": ["python", "-c", "print(6)"], "regex": "^5$"}, resp)
    assert not mismatch.passed and mismatch.score == 0.5
    assert mismatch.message == "python -c 'print(6)' exited with 0 as expected, but its output does not match '^5$'; it ends: 6"
    failed = run_check(code_exec.CustomCommand, {"command": ["python", "-c", "import sys; print('nope'); sys.exit(3)"]}, resp)
    assert not failed.passed and (failed.details or {})["exit_code"] == 3
    assert failed.message == "expected python -c 'import sys; print('\"'\"'nope'\"'\"'); sys.exit(3)' to exit with 0; it exited with 3; its output ends: nope"
    expected = run_check(code_exec.CustomCommand, {"command": ["sh", "-c", "exit 3"], "expect_exit": 3}, resp)
    assert expected.passed


def test_a_command_sees_the_suites_files_and_env_and_none_of_atps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATP_TEST_SECRET_TOKEN", "s3cr3t")
    script = "#!/bin/sh\necho \"mode=$MODE token=${ATP_TEST_SECRET_TOKEN:-none} home=$HOME\"\n"
    check = run_check(
        code_exec.CustomCommand,
        {"command": ["./show.sh"], "files": {"show.sh": script}, "env": {"MODE": "strict"}, "regex": "mode=strict token=none home=/"},
        response(),
    )
    assert check.passed, check.message


def test_a_missing_program_is_a_failed_check() -> None:
    check = run_check(code_exec.CustomCommand, {"command": ["no-such-program-x"]}, response())
    assert not check.passed and check.message.startswith("the command cannot be run: 'no-such-program-x' was not found on the PATH")


def test_output_is_kept_to_its_last_mebibyte() -> None:
    command = ["python", "-c", "import sys; sys.stdout.write('x' * (3 * 1024 * 1024) + 'THE END')"]
    check = run_check(code_exec.CustomCommand, {"command": command, "regex": "THE END$"}, response())
    assert check.passed, check.message
    details = check.details or {}
    assert details["output_cut_bytes"] == 3 * 1024 * 1024 + 7 - code_exec.MAX_OUTPUT_BYTES
    assert details["output"].endswith("xTHE END") and len(details["output"]) == code_exec.OUTPUT_DETAIL_CHARS + 1


HANGS = textwrap.dedent(
    """
    import os, sys, time
    if os.fork() == 0:
        if len(sys.argv) > 2:
            os.setsid()  # leaves the command's process group
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(os.readlink("/proc/self"))  # its pid as the host sees it
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(0.1)
    print("looping", flush=True)
    while True:
        time.sleep(0.1)
    """
)


def hang(tmp_path: Path, *extra: str) -> tuple[Check, int]:
    pid_file = tmp_path / "child.pid"
    config = {"command": ["python", "hang.py", str(pid_file), *extra], "files": {"hang.py": HANGS}, "timeout_seconds": 1}
    started = time.monotonic()
    check = run_check(code_exec.CustomCommand, config, response())
    assert time.monotonic() - started < 10
    return check, int(pid_file.read_text())


def test_a_hanging_command_is_killed_with_the_child_it_forked(tmp_path: Path, temporary: Path) -> None:
    check, child = hang(tmp_path)
    assert not check.passed
    assert check.message == "python hang.py " + str(tmp_path / "child.pid") + " was killed after 1 s (timeout_seconds); its output ends: looping"
    assert (check.details or {})["exit_code"] is None
    assert gone(child), f"the forked child {child} is still running"
    assert list(temporary.iterdir()) == []


@needs_namespaces
def test_a_child_that_left_the_process_group_dies_with_the_pid_namespace(tmp_path: Path) -> None:
    check, child = hang(tmp_path, "setsid")
    assert not check.passed and "was killed after 1 s" in check.message
    assert (check.details or {})["processes"].startswith("PID namespace")
    assert gone(child), f"the detached child {child} is still running"


def test_without_namespaces_the_process_group_is_killed_and_the_details_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(code_exec, "_isolation", code_exec.Isolation((), "unshare is switched off for this test"))
    check, child = hang(tmp_path)
    details = check.details or {}
    assert details["network"] == "not isolated (unshare is switched off for this test)"
    assert details["processes"] == "process group (no PID namespace: unshare is switched off for this test)"
    assert gone(child)


def test_a_cancelled_evaluation_kills_the_command_and_removes_its_folder(tmp_path: Path, temporary: Path) -> None:
    pid_file = tmp_path / "child.pid"
    config = code_exec.CustomCommandConfig(command=["python", "hang.py", str(pid_file)], files={"hang.py": HANGS})

    async def cancel_midway() -> None:
        with anyio.move_on_after(1.5):
            await code_exec.CustomCommand().evaluate(ctx_for(response()), config)

    anyio.run(cancel_midway)
    assert gone(int(pid_file.read_text()))
    assert list(temporary.iterdir()) == []


CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); print('connected')"


def listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    return server


@needs_namespaces
def test_an_isolated_command_has_no_network() -> None:
    with listener() as server:
        port = str(server.getsockname()[1])
        refused = run_check(code_exec.CustomCommand, {"command": ["python", "-c", CONNECT, port]}, response())
        allowed = run_check(code_exec.CustomCommand, {"command": ["python", "-c", CONNECT, port], "network": True}, response())
    assert not refused.passed and "Network is unreachable" in refused.message, refused.message
    assert (refused.details or {})["network"] == "isolated (a network namespace of its own)"
    assert allowed.passed, allowed.message
    assert (allowed.details or {})["network"] == "allowed (network: true)"
    assert (allowed.details or {})["processes"].startswith("PID namespace")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root, to run as another user")
def test_as_another_user_commands_run_isolated_or_say_why_not() -> None:
    """Isolation is probed for the user ATP runs as: as an unprivileged user it works where user
    namespaces may be made (and the interpreter may be run from one), else the details say why."""
    script = textwrap.dedent(
        """
        import json, anyio
        from atp.core.testing import response, run_evaluator
        from atp.evaluators import code_exec
        (check,) = run_evaluator(code_exec.CustomCommand, {"command": ["sh", "-c", "echo hi"], "regex": "hi"}, response())
        print(json.dumps({"why": code_exec._isolation.why, "passed": check.passed, "network": check.details["network"]}))
        """
    )
    shared = Path(tempfile.mkdtemp())  # (tmp_path's parents are the test user's own)
    try:
        shared.chmod(0o755)
        (shared / "probe.py").write_text(script)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, str(shared / "probe.py")],
            capture_output=True, text=True, timeout=60, cwd=shared, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        shutil.rmtree(shared)
    if done.returncode != 0 and "Permission denied" in done.stderr:
        pytest.skip(f"this interpreter cannot be run by another user here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["passed"]
    if seen["why"] is None:
        assert seen["network"] == "isolated (a network namespace of its own)"
    else:
        assert seen["network"] == f"not isolated ({seen['why']})"
