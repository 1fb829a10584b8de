"""The code-execution evaluators running real commands: pytest and ruff (installed in the dev
environment) over example artifacts (tests/fixtures/code_exec), commands that pass, fail,
hang, fork, detach, reach for the network and for ATP's secrets, and agents' files that try to
pass a check they should fail."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from atp.core import ledger
from atp.core.evaluator import EvalContext, Evaluator, checked_result
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, FileArtifact
from atp.core.results import Check
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from atp.evaluators.code_exec import command as command_module
from atp.evaluators.code_exec.command import MAX_OUTPUT_BYTES, Isolation, isolation
from atp.evaluators.code_exec.config import CustomCommandConfig
from atp.evaluators.code_exec.evaluators import OUTPUT_DETAIL_CHARS, CustomCommand, Lint, Pytest
from tests.conftest import FIXTURES, ROOT, write
from tests.facts import says

CODE = FIXTURES / "code_exec"
GOOD = (CODE / "solution_good.py").read_text()
HALF = (CODE / "solution_half.py").read_text()
TESTS = (CODE / "tests_for_solution.py").read_text()
DIRTY = (CODE / "dirty.txt").read_text()
ISOLATION = anyio.run(isolation)
needs_namespaces = pytest.mark.skipif(
    not ISOLATION.prefix, reason=f"no PID and network namespaces here: {ISOLATION.why}"
)


def ctx_for(
    resp: ATPResponse, workspace: Path | None = None, processes: ledger.ProcessLedger | None = None
) -> EvalContext:
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id=resp.task_id, task=test.task)
    return EvalContext(
        test=test,
        request=request,
        response=resp,
        trace=Trace.of([]),
        workspace=workspace,
        processes=processes,
    )


def run_check(
    evaluator: type[Evaluator],
    config: dict[str, Any],
    resp: ATPResponse,
    *,
    workspace: Path | None = None,
    settings: dict[str, Any] | None = None,
    processes: ledger.ProcessLedger | None = None,
) -> Check:
    """The one check of ``evaluator`` over ``resp``, its config validated as a suite's is."""
    import msgspec

    instance = evaluator(settings)
    parsed = msgspec.convert(config, instance.Config)

    async def evaluate() -> Any:
        return await instance.evaluate(ctx_for(resp, workspace, processes), parsed)

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


def marked(marker: str) -> set[int]:
    """The processes with ``marker`` among their arguments, as the host sees them (a command's
    own ``/proc`` shows only its PID namespace's pids)."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                arguments = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in arguments and alive(int(name)):
                found.add(int(name))
    return found


T = TypeVar("T")


def while_running(work: Callable[[], T], ready: Path, marker: str) -> tuple[T, set[int]]:
    """``work()``, run on another thread; and the processes with ``marker`` among their
    arguments once the file ``ready`` exists (the command wrote it)."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = work()
        except BaseException as exc:
            done["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while not ready.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = marked(marker)
    thread.join(30)
    assert not thread.is_alive()
    if "error" in done:
        raise done["error"]
    return done["result"], pids


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the commands' folders are made, to see that each is removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


# --- pytest ---------------------------------------------------------------------------------


def test_a_passing_solution_passes_with_score_1(temporary: Path) -> None:
    check = run_check(Pytest, {"files": {"test_solution.py": TESTS}}, response(files={"solution.py": GOOD}))
    assert check.passed and check.score == 1.0, check.message
    assert check.name == "pytest"
    says(check.message, "2 of 2", "passed", "100%")
    details = check.details or {}
    assert details["tests"] == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert details["exit_code"] == 0 and "failures" not in details
    assert list(temporary.iterdir()) == []


def test_a_half_right_solution_scores_half_and_names_the_failed_test() -> None:
    config = {"path": "solution.py", "files": {"test_solution.py": TESTS}}
    check = run_check(Pytest, config, response(files={"solution.py": HALF, "notes.md": "x"}))
    assert not check.passed and check.score == 0.5
    assert check.name == "pytest:solution.py"
    says(check.message, "1 of 2", "passed", "50%", "failed", "test_solution::test_sub", "assert -2 == 2")
    (failure,) = (check.details or {})["failures"]
    assert failure["test"] == "test_solution::test_sub"
    assert failure["message"].startswith("assert -2 == 2")
    assert "test_solution.py:9: AssertionError" in failure["text"]
    lenient = run_check(Pytest, {**config, "min_pass_rate": 0.5}, response(files={"solution.py": HALF}))
    assert lenient.passed and lenient.score == 0.5
    says(lenient.message, "1 of 2", "passed", "min_pass_rate 50%", "failed", "test_solution::test_sub")


def test_the_suites_tests_win_over_the_agents() -> None:
    resp = response(files={"solution.py": HALF, "test_solution.py": "def test_nothing():\n    pass\n"})
    check = run_check(Pytest, {"files": {"test_solution.py": TESTS}}, resp)
    assert not check.passed and (check.details or {})["replaced_by_suite_files"] == ["test_solution.py"]


def test_no_tests_a_collection_error_and_a_usage_error_fail_saying_so() -> None:
    none = run_check(Pytest, {}, response(files={"solution.py": GOOD}))
    assert not none.passed
    says(none.message, "pytest", "no tests", "exit code 5")
    broken = run_check(Pytest, {"files": {"test_solution.py": TESTS}}, response(files={"other.py": GOOD}))
    assert not broken.passed
    says(broken.message, "collect", "test_solution", "ModuleNotFoundError: No module named 'solution'")
    usage = run_check(Pytest, {"args": ["--no-such-option"]}, response(files={"solution.py": GOOD}))
    assert not usage.passed
    says(usage.message, "usage error", "exit code 4", "no JUnit report")
    assert "unrecognized arguments: --no-such-option" in usage.message


def fake_python(tmp_path: Path, module: str) -> str:
    """An interpreter that has no ``module``, as ``python -m`` says it."""
    script = write(
        tmp_path / "bin" / "python", f'#!/bin/sh\necho "$0: No module named {module}" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    return str(script)


def test_pytest_not_installed_says_how_to_install_it(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "pytest")
    check = run_check(Pytest, {}, response(files={"solution.py": GOOD}), settings={"python": python})
    assert not check.passed
    says(check.message, "pytest", "not installed", python, "pip install 'atp-evaluators[code]'")


def test_with_a_workspace_pytest_runs_in_a_copy(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write(workspace / "solution.py", GOOD)
    write(
        workspace / "test_solution.py",
        TESTS + "\n\ndef test_writes():\n    open('solution.py', 'w').write('broken')\n",
    )
    check = run_check(Pytest, {}, response(files={}), workspace=workspace)
    assert check.passed, check.message
    says(check.message, "3 of 3", "passed", "100%")
    assert (workspace / "solution.py").read_text() == GOOD


FORGES = textwrap.dedent(
    """
    import os, sys
    def add(a, b):
        return 0
    def sub(a, b):
        return 0
    report = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
    with open(report, "w") as f:
        f.write('<testsuites><testsuite><testcase classname="test_solution" name="test_add"/></testsuite></testsuites>')
    os._exit(EXIT)
    """
)


def test_a_forged_report_that_disagrees_with_the_exit_code_or_is_short_fails() -> None:
    """The agent's module runs inside pytest: it writes a report of its own and ends pytest."""
    config = {"path": "solution.py", "files": {"test_solution.py": TESTS}}
    short = run_check(Pytest, config, response(files={"solution.py": FORGES.replace("EXIT", "0")}))
    assert not short.passed
    says(short.message, "report holds 1 test", "define 2 test functions", "min_tests")
    disagreeing = run_check(Pytest, config, response(files={"solution.py": FORGES.replace("EXIT", "1")}))
    assert not disagreeing.passed
    says(disagreeing.message, "exit code 1", "failed", "JUnit report counts none failed")
    allowed = run_check(
        Pytest, {**config, "min_tests": 1}, response(files={"solution.py": FORGES.replace("EXIT", "0")})
    )
    assert allowed.passed  # what ATP cannot tell from a real run: see the Pytest docstring


def test_only_the_suites_tests_count_when_it_gives_them() -> None:
    resp = response(files={"solution.py": HALF, "test_mine.py": "def test_mine():\n    pass\n"})
    check = run_check(Pytest, {"files": {"test_solution.py": TESTS}, "min_pass_rate": 0.5}, resp)
    assert not check.passed
    says(
        check.message,
        "1 test",
        "outside",
        "test_solution.py",
        "test_mine::test_mine",
        "only the suite's tests",
    )
    assert (check.details or {})["foreign_tests"] == ["test_mine::test_mine"]


def test_tests_in_a_subfolder_import_the_agents_modules_as_python_m_pytest_would() -> None:
    check = run_check(
        Pytest, {"files": {"tests/test_solution.py": TESTS}}, response(files={"solution.py": GOOD})
    )
    assert check.passed, check.message
    says(check.message, "2 of 2", "passed", "100%")


FAKE_PYTEST = (
    "import sys\nreport = next(a.split('=', 1)[1] for a in sys.argv if a.startswith('--junitxml='))\n"
    "open(report, 'w').write('<testsuite>' + '<testcase classname=\"test_solution\" name=\"t\"/>' * 5 + '</testsuite>')\n"
)
FAKE_RUFF = (
    "import sys\nreport = next(a.split('=', 1)[1] for a in sys.argv if a.startswith('--output-file='))\n"
    "open(report, 'w').write('[]')\n"
)
BAD = "import os, sys\nx=1;y=2\n"


def test_an_agents_file_cannot_stand_in_for_the_tool() -> None:
    resp = response(files={"solution.py": HALF, "pytest.py": FAKE_PYTEST})
    tested = run_check(Pytest, {"files": {"test_solution.py": TESTS}}, resp)
    assert not tested.passed and tested.message.startswith("1 of 2 tests passed"), tested.message
    for fake in ({"ruff.py": FAKE_RUFF}, {"ruff/__init__.py": "", "ruff/__main__.py": FAKE_RUFF}):
        linted = run_check(Lint, {"select": ["E", "F"]}, response(files={"solution.py": BAD, **fake}))
        assert not linted.passed and (linted.details or {})["findings_total"] == 4, linted.message


CONFTEST_PASSES_ALL = (
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    report = outcome.get_result()\n"
    "    report.outcome, report.longrepr = 'passed', None\n"
)


def test_with_path_only_the_selected_files_of_a_workspace_are_taken(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write(workspace / "solution.py", HALF)
    write(workspace / "conftest.py", CONFTEST_PASSES_ALL)
    write(workspace / "ruff" / "__init__.py", "")
    write(workspace / "ruff" / "__main__.py", FAKE_RUFF)
    write(workspace / "dirty.py", BAD)
    resp = response(artifacts=[FileArtifact(path="solution.py"), FileArtifact(path="dirty.py")])
    config = {"path": "solution.py", "files": {"test_solution.py": TESTS}}
    tested = run_check(Pytest, config, resp, workspace=workspace)
    assert not tested.passed and tested.message.startswith("1 of 2 tests passed"), tested.message
    linted = run_check(Lint, {"path": "dirty.py", "select": ["E", "F"]}, resp, workspace=workspace)
    assert (linted.details or {})["findings_total"] == 4, linted.message
    everything = run_check(Pytest, {"files": {"test_solution.py": TESTS}}, resp, workspace=workspace)
    assert everything.passed  # without path, the whole workspace, its conftest.py too (as documented)


# --- lint -----------------------------------------------------------------------------------


def test_a_clean_file_passes_lint() -> None:
    check = run_check(
        Lint, {"select": ["E", "F", "W"]}, response(files={"solution.py": GOOD, "notes.md": "x"})
    )
    assert check.passed and check.score == 1.0, check.message
    says(check.message, "no findings", "solution.py")
    assert (check.details or {})["findings"] == [] and (check.details or {})["findings_total"] == 0


def test_a_dirty_file_fails_lint_with_its_findings_listed() -> None:
    resp = response(files={"solution.py": GOOD, "dirty.py": DIRTY})
    check = run_check(Lint, {"select": ["F"]}, resp)
    assert not check.passed and check.score == 0.25
    says(
        check.message,
        "3 findings",
        "solution.py, dirty.py",
        "max_findings 0",
        "dirty.py:1:8 F401 `os` imported but unused",
        "dirty.py:2:8 F401 `sys` imported but unused",
        "dirty.py:6:5 F841 Local variable `unused` is assigned to but never used",
    )
    details = check.details or {}
    assert details["findings_total"] == 3
    assert details["findings"][0] == {
        "file": "dirty.py",
        "line": 1,
        "column": 8,
        "code": "F401",
        "message": "`os` imported but unused",
    }
    allowed = run_check(Lint, {"select": ["F"], "max_findings": 3, "path": "dirty.py"}, resp)
    assert allowed.passed
    says(allowed.message, "3 findings", "max_findings 3", "dirty.py")
    ignored = run_check(Lint, {"select": ["F"], "ignore": ["F401"]}, resp)
    assert (ignored.details or {})["findings_total"] == 1 and ignored.score == 0.5


def test_the_agent_cannot_loosen_its_own_lint() -> None:
    resp = response(
        files={
            "dirty.py": DIRTY,
            "ruff.toml": '[lint]\nignore = ["F"]\n',
            "pyproject.toml": '[tool.ruff]\nexclude = ["*.py"]\n',
        }
    )
    check = run_check(Lint, {"select": ["F"]}, resp)
    assert not check.passed and (check.details or {})["findings_total"] == 3


def test_suppression_comments_do_not_switch_lint_off() -> None:
    for source in ("# ruff: noqa\nimport os\n", "# flake8: noqa\nimport os\n", "import os  # noqa: F401\n"):
        check = run_check(Lint, {"select": ["F"]}, response(files={"solution.py": source}))
        assert not check.passed and (check.details or {})["findings_total"] == 1, source


def test_lint_needs_a_python_file_and_ruff(tmp_path: Path) -> None:
    check = run_check(Lint, {}, response(files={"report.md": "# hi"}))
    assert not check.passed
    says(check.message, "Python file", "*.py", "report.md")
    python = fake_python(tmp_path, "ruff")
    check = run_check(Lint, {"python": python}, response(files={"a.py": GOOD}))
    says(check.message, "ruff", "not installed", python, "pip install 'atp-evaluators[code]'")


# --- custom_command -------------------------------------------------------------------------


def test_a_command_passes_on_its_exit_code_and_regex() -> None:
    resp = response(files={"solution.py": GOOD})
    ok = run_check(
        CustomCommand,
        {"command": "python -c 'import solution; print(solution.add(2, 3))'", "regex": "^5$"},
        resp,
    )
    assert ok.passed
    says(
        ok.message, "python -c 'import solution; print(solution.add(2, 3))'", "exited with 0", "matches '^5$'"
    )
    details = ok.details or {}
    assert details["exit_code"] == 0 and details["output"] == "5\n" and details["duration_seconds"] < 10
    mismatch = run_check(CustomCommand, {"command": ["python", "-c", "print(6)"], "regex": "^5$"}, resp)
    assert not mismatch.passed and mismatch.score == 0.5
    says(mismatch.message, "python -c 'print(6)'", "exited with 0", "does not match '^5$'", "ends: 6")
    failed = run_check(
        CustomCommand, {"command": ["python", "-c", "import sys; print('nope'); sys.exit(3)"]}, resp
    )
    assert not failed.passed and (failed.details or {})["exit_code"] == 3
    says(
        failed.message,
        "python -c 'import sys; print('\"'\"'nope'\"'\"'); sys.exit(3)'",
        "exit with 0",
        "exited with 3",
        "ends: nope",
    )
    expected = run_check(CustomCommand, {"command": ["sh", "-c", "exit 3"], "expect_exit": 3}, resp)
    assert expected.passed


def test_a_command_sees_the_suites_files_and_env_and_none_of_atps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATP_TEST_SECRET_TOKEN", "s3cr3t")
    script = '#!/bin/sh\necho "mode=$MODE token=${ATP_TEST_SECRET_TOKEN:-none} home=$HOME"\n'
    check = run_check(
        CustomCommand,
        {
            "command": ["./show.sh"],
            "files": {"show.sh": script},
            "env": {"MODE": "strict"},
            "regex": "mode=strict token=none home=/",
        },
        response(),
    )
    assert check.passed, check.message


def test_a_missing_program_is_a_failed_check() -> None:
    check = run_check(CustomCommand, {"command": ["no-such-program-x"]}, response())
    assert not check.passed
    says(check.message, "cannot be run", "'no-such-program-x'", "not found on the PATH")


def test_output_is_kept_to_its_last_mebibyte() -> None:
    command = ["python", "-c", "import sys; sys.stdout.write('x' * (3 * 1024 * 1024) + 'THE END')"]
    check = run_check(CustomCommand, {"command": command, "regex": "THE END$"}, response())
    assert check.passed, check.message
    details = check.details or {}
    assert details["output_cut_bytes"] == 3 * 1024 * 1024 + 7 - MAX_OUTPUT_BYTES
    assert details["output"].endswith("xTHE END") and len(details["output"]) == OUTPUT_DETAIL_CHARS + 1


HANGS = textwrap.dedent(
    """
    import os, sys, time
    if os.fork() == 0:
        if len(sys.argv) > 2:
            os.setsid()  # leaves the command's process group
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write("started")
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(0.1)
    print("looping", flush=True)
    while True:
        time.sleep(0.1)
    """
)


def hang(tmp_path: Path, *extra: str) -> tuple[Check, set[int]]:
    """A command that forks a child and loops, killed after 1 s; with the processes it was
    (the command, its child, and what ran it) while it ran."""
    ready = tmp_path / "child.started"
    config = {
        "command": ["python", "hang.py", str(ready), *extra],
        "files": {"hang.py": HANGS},
        "timeout_seconds": 1,
    }
    started = time.monotonic()
    check, pids = while_running(lambda: run_check(CustomCommand, config, response()), ready, str(ready))
    assert time.monotonic() - started < 10
    assert len(pids) >= 2, pids  # the command and its child, at least
    return check, pids


def test_a_hanging_command_is_killed_with_the_child_it_forked(tmp_path: Path, temporary: Path) -> None:
    check, pids = hang(tmp_path)
    assert not check.passed
    says(
        check.message,
        f"python hang.py {tmp_path / 'child.started'}",
        "killed after 1 s",
        "timeout_seconds",
        "ends: looping",
    )
    assert (check.details or {})["exit_code"] is None
    assert all(gone(pid) for pid in pids), f"some of {pids} still run"
    assert list(temporary.iterdir()) == []


@needs_namespaces
def test_a_child_that_left_the_process_group_dies_with_the_pid_namespace(tmp_path: Path) -> None:
    check, pids = hang(tmp_path, "setsid")
    assert not check.passed and "was killed after 1 s" in check.message
    assert (check.details or {})["processes"].startswith("PID namespace")
    assert all(gone(pid) for pid in pids), f"some of {pids} still run"


def test_without_namespaces_the_process_group_is_killed_and_the_details_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command_module, "_isolation", Isolation((), "unshare is switched off for this test"))
    check, pids = hang(tmp_path)
    details = check.details or {}
    assert details["network"] == "not isolated (unshare is switched off for this test)"
    assert details["processes"] == "process group (no PID namespace: unshare is switched off for this test)"
    assert details["proc"] == "the system's (the command can read the environment of ATP's processes)"
    assert all(gone(pid) for pid in pids)


def test_a_cancelled_evaluation_kills_the_command_and_removes_its_folder(
    tmp_path: Path, temporary: Path
) -> None:
    ready = tmp_path / "child.started"
    config = CustomCommandConfig(command=["python", "hang.py", str(ready)], files={"hang.py": HANGS})

    async def cancel_midway() -> None:
        with anyio.move_on_after(1.5):
            await CustomCommand().evaluate(ctx_for(response()), config)

    _, pids = while_running(lambda: anyio.run(cancel_midway), ready, str(ready))
    assert pids and all(gone(pid) for pid in pids)
    assert list(temporary.iterdir()) == []


def test_the_command_is_killed_when_atp_is(tmp_path: Path) -> None:
    """ATP killed with SIGKILL (no cleanup of its own) takes the command with it: the command
    runs with a parent-death signal."""
    ready = tmp_path / "started"
    script = textwrap.dedent(
        f"""
        from atp.core.testing import response, run_evaluator
        from atp.evaluators.code_exec.evaluators import CustomCommand
        command = ["python", "-c", "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(60)", {str(ready)!r}]
        run_evaluator(CustomCommand, {{"command": command, "timeout_seconds": 50}}, response())
        """
    )
    atp = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = marked(str(ready))
        assert pids, "the command did not start"
    finally:
        atp.kill()
        atp.wait()
    assert all(gone(pid) for pid in pids), f"some of {pids} outlived ATP"


def test_the_command_is_recorded_in_the_process_ledger(tmp_path: Path) -> None:
    """So that the next ``atp test`` (or ``atp clean``) stops what a killed ATP left."""
    processes = ledger.ProcessLedger.create(tmp_path)
    assert ledger.current() is None  # handed over, not found
    check = run_check(
        CustomCommand,
        {"command": ["sh", "-c", "echo $ATP_AGENT_TOKEN"], "regex": "^[0-9a-f]{16}$"},
        response(),
        processes=processes,
    )
    records = [json.loads(line) for line in (tmp_path / ledger.LEDGER_FILE).read_text().splitlines()]
    assert processes.running == frozenset()  # ended, once reaped
    processes.close()
    assert check.passed, check.message
    owner, record = records
    assert owner["owner"] == os.getpid()
    assert record["token"] == (check.details or {})["output"].strip() and record["pid"] > 1
    assert not (tmp_path / ledger.LEDGER_FILE).exists()  # a clean end


SEARCH_ENVIRON = textwrap.dedent(
    """
    import os, sys
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
            except OSError:
                continue
            if b"ATP_TEST_SECRET_MARKER=s3cr3t" in environ:
                print("found in", pid)
                sys.exit(0)
    print("not found")
    """
)


def with_secret(isolated: bool) -> dict[str, Any]:
    """The details of a command that searches /proc for ATP's secret, run by an ATP whose
    environment holds one (from its start: what /proc shows)."""
    script = textwrap.dedent(
        f"""
        import json
        from atp.core.testing import response, run_evaluator
        from atp.evaluators.code_exec import command
        from atp.evaluators.code_exec.evaluators import CustomCommand
        if not {isolated!r}:
            command._isolation = command.Isolation((), "unshare is switched off for this test")
        config = {{"command": ["python", "search.py"], "files": {{"search.py": {SEARCH_ENVIRON!r}}}}}
        (check,) = run_evaluator(CustomCommand, config, response())
        print(json.dumps(check.details))
        """
    )
    env = {**os.environ, "ATP_TEST_SECRET_MARKER": "s3cr3t"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_namespaces
def test_an_isolated_command_sees_only_its_own_processes_in_proc() -> None:
    details = with_secret(isolated=True)
    assert details["output"] == "not found\n", details
    if os.geteuid() == 0 or "--map-root-user" in ISOLATION.prefix:
        assert details["proc"] == "the namespace's own, but the command is root there and could unmount it"
    else:
        assert details["proc"] == "the namespace's own (ATP's processes are not in it)"
    lister = {
        "command": [
            "python",
            "-c",
            "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
        ]
    }
    assert (run_check(CustomCommand, lister, response()).details or {})["output"] == "[1]\n"


def test_without_namespaces_atps_environment_is_readable_as_the_docs_say() -> None:
    details = with_secret(isolated=False)
    assert details["output"].startswith("found in"), details
    assert details["proc"] == "the system's (the command can read the environment of ATP's processes)"


LIMITS = "import resource; print(*(resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('AS', 'FSIZE', 'CORE', 'NOFILE')))"


def test_the_command_runs_with_resource_limits() -> None:
    check = run_check(CustomCommand, {"command": ["python", "-c", LIMITS]}, response())
    mib = 1024 * 1024
    assert (check.details or {})["output"] == f"{(4096 * mib,) * 2} {(1024 * mib,) * 2} (0, 0) (4096, 4096)\n"
    check = run_check(
        CustomCommand, {"command": ["python", "-c", LIMITS], "max_memory_mb": 0, "max_file_mb": 0}, response()
    )
    assert (check.details or {})["output"].endswith(" (0, 0) (4096, 4096)\n")
    assert "(4294967296, 4294967296)" not in (check.details or {})["output"]


def test_a_command_past_its_limits_fails() -> None:
    write_big = "open('big', 'wb').write(b'x' * (2 * 1024 * 1024))"
    check = run_check(CustomCommand, {"command": ["python", "-c", write_big], "max_file_mb": 1}, response())
    assert not check.passed and "File too large" in check.message, check.message
    allocate = "b = bytearray(600 * 1024 * 1024)"
    check = run_check(
        CustomCommand, {"command": ["python", "-c", allocate], "max_memory_mb": 300}, response()
    )
    assert not check.passed and "MemoryError" in check.message, check.message


def test_the_command_gets_default_signal_dispositions() -> None:
    """The trampoline is Python, which ignores SIGPIPE: the command must not inherit that."""
    check = run_check(CustomCommand, {"command": ["sh", "-c", "yes | head -n 1"]}, response())
    assert check.passed and (check.details or {})["output"] == "y\n", check.details


def test_a_deeply_nested_folder_is_removed(temporary: Path) -> None:
    nest = "import os\nfor i in range(3000):\n    os.mkdir('d'); os.chdir('d')\nos.chmod('.', 0o500)\nprint('made')"
    check = run_check(CustomCommand, {"command": ["python", "-c", nest]}, response())
    assert check.passed, check.message
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
        refused = run_check(CustomCommand, {"command": ["python", "-c", CONNECT, port]}, response())
        allowed = run_check(
            CustomCommand, {"command": ["python", "-c", CONNECT, port], "network": True}, response()
        )
    assert not refused.passed and "Network is unreachable" in refused.message, refused.message
    assert (refused.details or {})["network"] == "isolated (a network namespace of its own)"
    assert allowed.passed, allowed.message
    assert (allowed.details or {})["network"] == "allowed (network: true)"
    assert (allowed.details or {})["processes"].startswith("PID namespace")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root, to run as another user"
)
def test_as_another_user_commands_run_isolated_or_say_why_not() -> None:
    """Isolation is probed for the user ATP runs as: as an unprivileged user it works where user
    namespaces may be made (and the interpreter may be run from one), else the details say why."""
    script = textwrap.dedent(
        """
        import json, anyio
        from atp.core.testing import response, run_evaluator
        from atp.evaluators.code_exec import command
        from atp.evaluators.code_exec.evaluators import CustomCommand
        (check,) = run_evaluator(CustomCommand, {"command": ["sh", "-c", "echo hi"], "regex": "hi"}, response())
        print(json.dumps({"why": command._isolation.why, "passed": check.passed, "network": check.details["network"]}))
        """
    )
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    runs = subprocess.run(
        [*nobody, "sh", "-c", 'exec "$0" -c ""', sys.executable], capture_output=True, text=True, timeout=60
    )
    if runs.returncode != 0:  # (commands start through ATP's interpreter: it must be able to run it)
        pytest.skip(f"this interpreter cannot be run by another user here: {runs.stderr.strip()}")
    shared = Path(tempfile.mkdtemp())  # (tmp_path's parents are the test user's own)
    try:
        shared.chmod(0o755)
        (shared / "probe.py").write_text(script)
        done = subprocess.run(
            [*nobody, sys.executable, str(shared / "probe.py")],
            capture_output=True, text=True, timeout=60, cwd=shared, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        shutil.rmtree(shared)
    if done.returncode != 0 and "Permission denied" in done.stderr:
        pytest.skip(
            f"this interpreter cannot be run by another user here: {done.stderr.strip().splitlines()[-1]}"
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["passed"]
    if seen["why"] is None:
        assert seen["network"] == "isolated (a network namespace of its own)"
    else:
        assert seen["network"] == f"not isolated ({seen['why']})"
