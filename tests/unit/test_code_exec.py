"""The code-execution evaluators' own parts, without running pytest or ruff: their configs
(checked when a suite loads), the reading of JUnit and ruff reports (good and hostile, and
cross-checked with pytest's exit code), the folder a command runs in (what goes in, what is
refused, that it is always removed, however deep), the isolation probe and the killing of a
command."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.errors import SuiteError
from atp.core.evaluator import EvalContext
from atp.core.plugins import Plugins
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, FileArtifact, ReferenceArtifact
from atp.core.testing import make_test, response
from atp.core.trace import Trace
from atp.core.tree import remove_tree as _remove_tree
from atp.evaluators.code_exec import command as command_module
from atp.evaluators.code_exec import folder as folder_module
from atp.evaluators.code_exec import reports as reports_module
from atp.evaluators.code_exec.command import (
    PROBE_SECONDS,
    Isolation,
    Outcome,
    _Command,
    _Tail,
    command_env,
    find_program,
    isolation,
    trampoline,
)
from atp.evaluators.code_exec.config import CustomCommandConfig, LintConfig, PytestConfig
from atp.evaluators.code_exec.evaluators import CustomCommand, Lint, Pytest, _reason, suite_tests
from atp.evaluators.code_exec.folder import Folder, FolderError, work_folder
from atp.evaluators.code_exec.reports import (
    FAILURE_TEXT_CHARS,
    MAX_JUNIT_BYTES,
    SHOWN_FAILURES,
    SHOWN_FINDINGS,
    Finding,
    ReportError,
    parse_junit,
    parse_ruff,
)
from tests.conftest import FIXTURES, write
from tests.facts import says

CODE = FIXTURES / "code_exec"
GOOD = (CODE / "solution_good.py").read_text()


def ctx_for(
    resp: ATPResponse, *, workspace: Path | None = None, agent_dir: Path | None = None
) -> EvalContext:
    test = make_test()
    request = ATPRequest(version=PROTOCOL_VERSION, task_id=resp.task_id, task=test.task)
    return EvalContext(
        test=test,
        request=request,
        response=resp,
        trace=Trace.of([]),
        workspace=workspace,
        agent_dir=agent_dir,
    )


def folder_of(
    ctx: EvalContext, suite_files: dict[str, str] | None = None, *, whole_workspace: bool = True
) -> dict[str, Any]:
    """Make the command's folder for every artifact of ``ctx``, and report what it held: its
    files' texts by relative path, and the folder itself (removed by then)."""

    async def make() -> dict[str, Any]:
        artifacts = list(ctx.response.artifacts)
        async with work_folder(ctx, artifacts, suite_files or {}, whole_workspace=whole_workspace) as folder:
            texts = {
                path.relative_to(folder.work).as_posix(): path.read_text()
                for path in sorted(folder.work.rglob("*"))
                if path.is_file() and not path.is_symlink()
            }
            return {"folder": folder, "texts": texts}

    return anyio.run(make)


def refusal(ctx: EvalContext, suite_files: dict[str, str] | None = None) -> str:
    with pytest.raises(FolderError) as info:
        folder_of(ctx, suite_files)
    return str(info.value)


# --- configs --------------------------------------------------------------------------------


def convert(config: dict[str, Any], kind: type[msgspec.Struct]) -> Any:
    return msgspec.convert(config, kind)


def test_configs_have_defaults_that_check_strictly() -> None:
    pytest_config = convert({}, PytestConfig)
    assert (pytest_config.min_pass_rate, pytest_config.args, pytest_config.files) == (1.0, [], {})
    assert (pytest_config.timeout_seconds, pytest_config.network, pytest_config.env) == (None, False, {})
    assert (pytest_config.min_tests, pytest_config.max_memory_mb, pytest_config.max_file_mb) == (
        None,
        4096,
        1024,
    )
    lint = convert({}, LintConfig)
    assert (lint.select, lint.ignore, lint.max_findings, lint.path) == (None, None, 0, None)
    command = convert({"command": "python -c 'print(1)'"}, CustomCommandConfig)
    assert command.command == ["python", "-c", "print(1)"]
    assert command.expect_exit == 0 and command.regex is None


@pytest.mark.parametrize(
    ("kind", "config", "error"),
    [
        (PytestConfig, {"min_pass_rate": 1.5}, "Expected `float` <= 1"),
        (PytestConfig, {"timout_seconds": 5}, "Object contains unknown field `timout_seconds`"),
        (PytestConfig, {"timeout_seconds": 0}, "Expected `float` > 0"),
        (PytestConfig, {"timeout_seconds": 3601}, "Expected `float` <= 3600"),
        (PytestConfig, {"files": {"/etc/test_x.py": ""}}, "is an absolute path; it must be relative"),
        (PytestConfig, {"files": {"../test_x.py": ""}}, "leads out of the folder (..)"),
        (PytestConfig, {"files": {"": ""}}, "names no file"),
        (PytestConfig, {"files": {"tests/": ""}}, "names no file"),
        (
            PytestConfig,
            {"files": {"a": "", "./a": ""}},
            "'files' has 'a' and './a', which name the same file 'a'",
        ),
        (
            PytestConfig,
            {"files": {"a": "", "b/../a": ""}},
            "'files' has 'a' and 'b/../a', which name the same file 'a'",
        ),
        (PytestConfig, {"files": {"d/" * 64 + "x.py": ""}}, "has 65 parts; ATP takes at most 64"),
        (PytestConfig, {"min_tests": 0}, "Expected `int` >= 1"),
        (PytestConfig, {"max_memory_mb": -1}, "Expected `int` >= 0"),
        (PytestConfig, {"args": ["--junitxml=/tmp/mine.xml"]}, "'args' may not set --junitxml"),
        (PytestConfig, {"args": ["--junit-xml", "x.xml"]}, "'args' may not set --junit-xml"),
        (PytestConfig, {"args": ["--junit-prefix=x"]}, "'args' may not set --junit-prefix"),
        (PytestConfig, {"args": ["--rootdir=/"]}, "'args' may not set --rootdir"),
        (PytestConfig, {"args": ["-p", "no:junitxml"]}, "'args' may not switch off the junitxml plugin"),
        (PytestConfig, {"args": ["-pno:junitxml"]}, "'args' may not switch off the junitxml plugin"),
        (
            PytestConfig,
            {"args": ["-o", "junit_family=xunit1"]},
            "'args' may not override the ini option 'junit_family'",
        ),
        (
            PytestConfig,
            {"args": ["-qojunit_logging=all"]},
            "'args' may not override the ini option 'junit_logging'",
        ),
        (
            PytestConfig,
            {"args": ["--override-ini=addopts=-p no:junitxml"]},
            "may not override the ini option 'addopts'",
        ),
        (
            PytestConfig,
            {"args": ["--override-ini", "junit_suite_name=x"]},
            "may not override the ini option 'junit_suite_name'",
        ),
        (
            PytestConfig,
            {"env": {"PYTEST_ADDOPTS": "--junitxml=x"}},
            "'env.PYTEST_ADDOPTS' may not set --junitxml",
        ),
        (PytestConfig, {"env": {"A=B": "1"}}, "invalid variable name"),
        (PytestConfig, {"python": " "}, "'python' names no interpreter"),
        (PytestConfig, {"path": ""}, "'path' is empty"),
        (LintConfig, {"select": []}, "'select' names no rule"),
        (LintConfig, {"select": ["E,F"]}, "invalid rule code 'E,F'"),
        (LintConfig, {"ignore": ["--fix"]}, "invalid rule code '--fix'"),
        (LintConfig, {"max_findings": -1}, "Expected `int` >= 0"),
        (CustomCommandConfig, {}, "missing required field `command`"),
        (CustomCommandConfig, {"command": []}, "'command' names no program"),
        (CustomCommandConfig, {"command": "  "}, "'command' names no program"),
        (CustomCommandConfig, {"command": "echo 'open"}, "'command' cannot be split into arguments"),
        (
            CustomCommandConfig,
            {"command": ["true"], "regex": "(x"},
            "'regex' is not a valid regular expression",
        ),
        (CustomCommandConfig, {"command": ["true"], "regex": ""}, "'regex' is empty"),
        (CustomCommandConfig, {"command": ["true"], "expect_exit": 256}, "Expected `int` <= 255"),
    ],
)
def test_configs_refuse_what_would_not_work(
    kind: type[msgspec.Struct], config: dict[str, Any], error: str
) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        convert(config, kind)
    assert error in str(info.value)


def test_suite_files_paths_are_normalised() -> None:
    assert convert({"files": {"./tests/test_a.py": "x"}}, PytestConfig).files == {"tests/test_a.py": "x"}


def test_pytest_args_that_leave_the_report_alone_are_taken() -> None:
    args = [
        "-x",
        "-q",
        "-k",
        "pno:junitxml or add",
        "-p",
        "no:randomly",
        "-o",
        "python_files=check_*.py",
        "tests/",
    ]
    assert convert({"args": args}, PytestConfig).args == args
    assert convert({"args": ["--", "-p", "no:junitxml"]}, PytestConfig).args == ["--", "-p", "no:junitxml"]


def test_the_suites_test_functions_are_counted() -> None:
    files = {
        "test_a.py": "def test_one():\n    pass\n\nasync def test_two():\n    pass\n\nclass TestX:\n    def test_three(self):\n        pass\n",
        "tests/b_test.py": "def testing():\n    pass\n",
        "helpers.py": "def test_not_collected():\n    pass\n",
        "conftest.py": "",
    }
    assert suite_tests(files) == {"test_a.py": 3, "tests/b_test.py": 1}


def test_a_typo_in_an_assertion_fails_the_suite_when_it_loads(tmp_path: Path, plugins: Plugins) -> None:
    path = write(
        tmp_path / "suite.yaml",
        """
        test_suite: code
        tests:
          - id: t
            task: {description: write code}
            assertions:
              - type: pytest
                config: {min_pass_rate: 0.5}
              - type: lint
                config: {selct: [E]}
        """,
    )
    from atp.core.suite import load_suite

    with pytest.raises(SuiteError) as info:
        load_suite(path, plugins.evaluators)
    says(str(info.value), f"{path}:9:", "tests[0].assertions[1].config.selct", "unknown field", "'selct'")


def test_the_three_assertion_types_are_registered_as_quality_checks(plugins: Plugins) -> None:
    for name, cls in (("pytest", Pytest), ("lint", Lint), ("custom_command", CustomCommand)):
        assert plugins.evaluator(name) is cls and cls.category == "quality"


# --- time limits and environment --------------------------------------------------------------


def test_the_command_gets_five_sixths_of_the_evaluator_limit_at_most() -> None:
    evaluator = Pytest()
    assert evaluator.command_timeout(convert({}, PytestConfig)) == (50.0, None)
    assert evaluator.command_timeout(convert({"timeout_seconds": 5}, PytestConfig)) == (5.0, None)
    timeout, note = evaluator.command_timeout(convert({"timeout_seconds": 120}, PytestConfig))
    assert timeout == 50.0
    says(note, "timeout_seconds 120", "50 s", "60 s", "evaluators.pytest.timeout_seconds", "given 50 s")
    raised = Lint({"timeout_seconds": 300})
    assert raised.command_timeout(convert({"timeout_seconds": 120}, LintConfig)) == (120.0, None)
    assert raised.command_timeout(convert({}, LintConfig)) == (250.0, None)


def test_the_environment_is_minimal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    folder = Folder(tmp_path, tmp_path / "work", tmp_path / "home", tmp_path / "tmp", [], [], 0)
    env = command_env(folder, "/opt/py/bin/python3", {"MODE": "strict"})
    assert env == {
        "PATH": "/opt/py/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MODE": "strict",
    }
    assert command_env(folder, "python3", {})["PATH"] == "/usr/bin:/bin"  # no empty entry


def test_programs_are_found_on_the_path_or_in_the_folder(tmp_path: Path) -> None:
    script = write(tmp_path / "check.sh", "#!/bin/sh\n")
    assert find_program("./check.sh", os.defpath, tmp_path) == (None, "'./check.sh' is not executable")
    script.chmod(0o755)
    assert find_program("./check.sh", os.defpath, tmp_path) == (str(script), None)
    assert find_program("./absent", os.defpath, tmp_path) == (None, "'./absent' is not a file")
    assert find_program(sys.executable, os.defpath, tmp_path) == (sys.executable, None)
    program, problem = find_program("no-such-program-x", "/nonexistent", tmp_path)
    assert program is None
    says(problem, "'no-such-program-x'", "not found on the PATH", "/nonexistent")


def test_only_the_end_of_a_long_output_is_kept() -> None:
    tail = _Tail(10)
    for chunk in (b"0123456789", b"abcdefghij", b"KLMNOPQRST", b"xyz"):
        tail.add(chunk)
    assert tail.kept() == b"NOPQRSTxyz" and tail.total == 33


# --- JUnit reports --------------------------------------------------------------------------


def test_a_junit_report_is_counted_by_outcome() -> None:
    report = parse_junit((CODE / "junit_mixed.xml").read_bytes())
    assert (report.passed, report.failed, report.errors, report.skipped, report.ran) == (1, 1, 1, 1, 3)
    assert [f.test for f in report.failures] == ["test_solution::test_sub", "test_solution::test_fixture"]
    failed = report.failures[0]
    assert failed.message == "assert 8 == 2\n +  where 8 = sub(5, 3)"
    assert failed.text.endswith("test_solution.py:9: AssertionError")
    assert report.collection_errors == []


def test_a_collection_error_is_told_apart() -> None:
    report = parse_junit((CODE / "junit_collection_error.xml").read_bytes())
    assert report.ran == 1 and report.failures == []
    (error,) = report.collection_errors
    assert error.test == "test_solution" and error.message == "collection failure"
    assert _reason(error) == "ModuleNotFoundError: No module named 'solution'"


def test_many_failures_are_all_counted_and_fifty_listed_with_short_texts() -> None:
    cases = "".join(
        f'<testcase classname="t" name="test_{i}"><failure message="m{i}">{"x" * 5000}END</failure></testcase>'
        for i in range(80)
    )
    report = parse_junit(f"<testsuites><testsuite>{cases}</testsuite></testsuites>".encode())
    assert report.failed == 80 and len(report.failures) == SHOWN_FAILURES == 50
    text = report.failures[0].text
    assert text.startswith("…") and text.endswith("xEND") and len(text) == FAILURE_TEXT_CHARS + 1


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuites><testsuite><testcase name="t"><failure message="&lol9;"/></testcase></testsuite></testsuites>"""


@pytest.mark.parametrize(
    "data",
    [
        BOMB.encode(),
        BOMB.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="utf-16"?>').encode("utf-16"),
        b'<?xml version="1.0"?><!DOCTYPE t SYSTEM "file:///etc/passwd"><testsuites/>',
    ],
    ids=["entity-expansion", "utf-16", "external"],
)
def test_a_junit_report_with_a_doctype_is_refused_at_once(data: bytes) -> None:
    started = time.perf_counter()
    with pytest.raises(ReportError) as info:
        parse_junit(data)
    says(str(info.value), "JUnit report", "DOCTYPE")
    assert time.perf_counter() - started < 1


def test_a_junit_report_that_is_too_large_or_not_xml_is_refused() -> None:
    with pytest.raises(ReportError) as info:
        parse_junit(b" " * (MAX_JUNIT_BYTES + 1))
    says(str(info.value), "JUnit report", "larger than 16 MiB")
    with pytest.raises(ReportError, match="^the JUnit report is not well-formed XML: "):
        parse_junit(b"<testsuites><testcase name='x'>")
    with pytest.raises(ReportError, match="not well-formed"):
        parse_junit(b"PASSED 10 tests")


def test_tests_from_outside_the_suites_test_files_are_counted_apart() -> None:
    cases = (
        '<testcase classname="test_solution" name="test_a"/>'
        '<testcase classname="test_solution.TestX" name="test_b"/>'
        '<testcase classname="tests.test_more" name="test_c"/>'
        '<testcase classname="test_mine" name="test_cheat"/>'
        '<testcase classname="test_solutionx" name="test_d"/>'
    )
    data = f"<testsuites><testsuite>{cases}</testsuite></testsuites>".encode()
    report = parse_junit(data, ["test_solution.py", "tests/test_more.py"])
    assert (report.passed, report.total, report.foreign) == (5, 5, 2)
    assert report.foreign_tests == ["test_mine::test_cheat", "test_solutionx::test_d"]
    assert parse_junit(data).foreign == 0  # no test files given: every test counts
    xunit1 = b'<testsuite><testcase classname="test_solution" name="t" file="elsewhere.py"/></testsuite>'
    assert parse_junit(xunit1, ["test_solution.py"]).foreign == 1  # by its file, where it has one


def judged(tmp_path: Path, code: int | None, report: str | None, config: dict[str, Any] | None = None) -> Any:
    """The pytest check for a run that ended with ``code`` and wrote ``report``."""
    (tmp_path / "work").mkdir(exist_ok=True)
    if report is not None:
        (tmp_path / "junit.xml").write_text(f"<testsuites><testsuite>{report}</testsuite></testsuites>")
    folder = Folder(tmp_path, tmp_path / "work", tmp_path / "home", tmp_path / "tmp", [], [], 0)
    outcome = Outcome(code, "the output", 0, 0.5, 50.0, "isolated", "PID namespace")
    parsed = convert({"files": {"test_solution.py": TESTS_FOR_SOLUTION}, **(config or {})}, PytestConfig)
    details = {"output": outcome.output}
    return anyio.run(Pytest().judge, "pytest", parsed, folder, outcome, details)


TESTS_FOR_SOLUTION = (CODE / "tests_for_solution.py").read_text()
PASSED = '<testcase classname="test_solution" name="test_add"/><testcase classname="test_solution" name="test_sub"/>'
FAILED = '<testcase classname="test_solution" name="test_add"/><testcase classname="test_solution" name="test_sub"><failure message="assert 1 == 2"/></testcase>'


def test_a_report_that_disagrees_with_pytests_exit_code_fails(tmp_path: Path) -> None:
    assert judged(tmp_path, 0, PASSED).passed
    assert not judged(tmp_path, 1, FAILED).passed and judged(tmp_path, 1, FAILED).score == 0.5
    lying = judged(tmp_path, 1, PASSED)
    assert not lying.passed and lying.score == 0
    says(lying.message, "exit code 1", "failed", "JUnit report counts none failed", "trusts neither")
    hiding = judged(tmp_path, 0, FAILED)
    assert not hiding.passed
    assert hiding.message.startswith(
        "pytest's exit code 0 says every test passed, but its JUnit report counts 1 failed or errored"
    )
    killed = judged(tmp_path, -9, PASSED)
    assert not killed.passed and killed.message.startswith(
        "pytest was ended by signal 9, which is not how pytest ends a test run"
    )
    odd = judged(tmp_path, 7, PASSED)
    assert not odd.passed and odd.message.startswith(
        "pytest exited with 7, which is not how pytest ends a test run"
    )


def test_a_report_with_too_few_tests_fails(tmp_path: Path) -> None:
    one = '<testcase classname="test_solution" name="test_add"/>'
    short = judged(tmp_path, 0, one)
    assert not short.passed and (short.details or {})["min_tests"] == 2
    says(short.message, "report holds 1 test", "define 2 test functions", "min_tests")
    assert judged(tmp_path, 0, one, {"min_tests": 1}).passed
    explicit = judged(tmp_path, 0, PASSED, {"min_tests": 3})
    assert not explicit.passed
    says(explicit.message, "report holds 2 tests", "fewer than min_tests 3")


# --- ruff reports ---------------------------------------------------------------------------


def test_a_ruff_report_lists_its_findings_relative_to_the_folder() -> None:
    count, findings = parse_ruff((CODE / "ruff_findings.json").read_bytes(), Path("/tmp/rufft"))
    assert count == 3
    assert [str(f) for f in findings] == [
        "dirty.py:1:8 F401 `os` imported but unused",
        "dirty.py:2:8 F401 `sys` imported but unused",
        "dirty.py:6:5 F841 Local variable `unused` is assigned to but never used",
    ]
    assert findings[0]._asdict() == {
        "file": "dirty.py",
        "line": 1,
        "column": 8,
        "code": "F401",
        "message": "`os` imported but unused",
    }


def test_every_finding_is_counted_and_a_hundred_listed() -> None:
    item = '{"filename": "a.py", "location": {"row": 1, "column": 1}, "code": null, "message": "bad"}'
    count, findings = parse_ruff(f"[{','.join([item] * 250)}]".encode())
    assert count == 250 and len(findings) == SHOWN_FINDINGS == 100
    assert findings[0].code == "syntax-error"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"{not json", ("ruff's report", "not JSON: ")),
        (b'{"findings": []}', ("ruff's report", "not a JSON list of findings")),
        (b"[1, 2]", ("ruff's report", "finding", "not a JSON object")),
        (b"[" * 100_000, ("ruff's report", "not JSON: ")),
    ],
)
def test_a_ruff_report_that_is_not_one_is_refused(data: bytes, error: tuple[str, ...]) -> None:
    with pytest.raises(ReportError) as info:
        parse_ruff(data)
    says(str(info.value), *error)


def test_a_ruff_report_that_is_too_large_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reports_module, "MAX_RUFF_BYTES", 100)
    with pytest.raises(ReportError) as info:
        parse_ruff(b"[" + b" " * 100 + b"]")
    says(str(info.value), "ruff's report", "larger than 0 MiB")


def test_a_malformed_finding_keeps_what_it_has() -> None:
    count, (finding,) = parse_ruff(b'[{"location": "row 3", "code": "E1", "filename": "x.py"}]')
    assert count == 1 and finding == Finding("x.py", None, None, "E1", "")


# --- the folder a command runs in -----------------------------------------------------------


def test_the_agents_files_go_in_by_their_relative_paths() -> None:
    resp = response(files={"solution.py": GOOD, "pkg/util.py": "X = 1\n", "./pkg/../notes.txt": "n"})
    made = folder_of(ctx_for(resp))
    assert made["texts"] == {"solution.py": GOOD, "pkg/util.py": "X = 1\n", "notes.txt": "n"}
    folder: Folder = made["folder"]
    assert folder.placed == ["solution.py", "pkg/util.py", "notes.txt"]
    assert folder.work.parent == folder.root and folder.home.parent == folder.root
    assert not folder.root.exists()


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("../escape.py", ("'../escape.py'", "leads out of the folder", "(..)")),
        ("a/../../escape.py", ("'a/../../escape.py'", "leads out of the folder", "(..)")),
        ("/etc/cron.d/x", ("'/etc/cron.d/x'", "absolute path", "relative to the folder")),
    ],
)
def test_a_path_that_leads_out_is_refused(path: str, error: tuple[str, ...]) -> None:
    message = refusal(ctx_for(response(files={path: "x"})))
    says(message, "artifact path", *error, "command's folder", "relative paths")


def test_the_suites_files_win_and_say_so() -> None:
    resp = response(files={"solution.py": GOOD, "test_solution.py": "def test_cheat(): pass\n"})
    made = folder_of(ctx_for(resp), {"test_solution.py": "real tests\n", "run.sh": "#!/bin/sh\nexit 0\n"})
    assert made["texts"]["test_solution.py"] == "real tests\n"
    assert made["folder"].replaced == ["test_solution.py"]


def test_a_suite_script_is_made_executable(tmp_path: Path) -> None:
    async def modes() -> tuple[int, int]:
        async with work_folder(ctx_for(response()), [], {"run.sh": "#!/bin/sh\n", "data.txt": "x"}) as folder:
            return (folder.work / "run.sh").stat().st_mode & 0o777, (
                folder.work / "data.txt"
            ).stat().st_mode & 0o777

    assert anyio.run(modes) == (0o755, 0o644)


def test_a_file_artifact_without_content_is_copied_from_the_agents_folder(tmp_path: Path) -> None:
    write(tmp_path / "out" / "solution.py", GOOD)
    resp = response(
        artifacts=[FileArtifact(path="out/solution.py"), ReferenceArtifact(path="out/solution.py")]
    )
    assert folder_of(ctx_for(resp, agent_dir=tmp_path))["texts"] == {"out/solution.py": GOOD}
    os.mkfifo(tmp_path / "pipe.py")
    message = refusal(ctx_for(response(artifacts=[FileArtifact(path="pipe.py")]), agent_dir=tmp_path))
    says(message, "pipe.py", "not a regular file")
    message = refusal(ctx_for(response(artifacts=[FileArtifact(path="solution.py")])))
    says(message, "solution.py", "relative path", "no working folder")


def make_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    write(workspace / "solution.py", GOOD)
    write(workspace / "pkg" / "__init__.py", "")
    write(tmp_path / "outside" / "secret.txt", "outside")
    os.symlink(tmp_path / "outside", workspace / "linked")  # a folder link leading out
    os.symlink(workspace / "solution.py", workspace / "alias.py")  # an absolute link inside
    os.mkfifo(workspace / "pipe")
    return workspace


def test_with_a_workspace_the_command_gets_a_copy(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    resp = response(
        artifacts=[
            FileArtifact(path="solution.py"),
            FileArtifact(path=str(workspace / "pkg" / "extra.py"), content="Y = 2\n"),
            FileArtifact(path="linked/secret.txt", content="replaced in the copy"),
        ]
    )

    async def inspect() -> dict[str, Any]:
        ctx = ctx_for(resp, workspace=workspace)
        async with work_folder(ctx, list(resp.artifacts), {}) as folder:
            alias = os.readlink(folder.work / "alias.py")
            (folder.work / "solution.py").write_text("changed by the command")
            return {
                "folder": folder,
                "alias": alias,
                "linked": (folder.work / "linked").is_symlink(),
                "secret": (folder.work / "linked" / "secret.txt").read_text(),
                "extra": (folder.work / "pkg" / "extra.py").read_text(),
                "pipe": (folder.work / "pipe").exists(),
            }

    seen = anyio.run(inspect)
    folder = seen["folder"]
    assert seen["alias"] == str(folder.work / "solution.py")  # pointed at the copy
    assert not seen["linked"] and seen["secret"] == "replaced in the copy"  # never written through the link
    assert seen["extra"] == "Y = 2\n" and not seen["pipe"] and folder.skipped == 1
    assert folder.placed == ["solution.py", "pkg/extra.py", "linked/secret.txt"]
    assert (workspace / "solution.py").read_text() == GOOD  # the workspace is as it was
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside"
    assert not (workspace / "pkg" / "extra.py").exists()
    assert not folder.root.exists()


def test_a_workspace_file_must_be_in_the_workspace(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    message = refusal(ctx_for(response(artifacts=[FileArtifact(path="absent.py")]), workspace=workspace))
    says(message, "absent.py", "not in the workspace")
    message = refusal(
        ctx_for(response(artifacts=[FileArtifact(path="linked/secret.txt")]), workspace=workspace)
    )
    assert message.startswith("linked/secret.txt is outside the workspace")
    message = refusal(ctx_for(response(files={str(tmp_path / "elsewhere.py"): "x"}), workspace=workspace))
    assert message.endswith(
        "is an absolute path; it must be relative to the folder; ATP places the agent's files in the workspace by their relative paths"
    )


def test_the_copy_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    workspace = tmp_path / "workspace"
    for i in range(6):
        write(workspace / f"f{i}.txt", "0123456789")
    monkeypatch.setattr(folder_module, "MAX_COPY_FILES", 5)
    says(
        refusal(ctx_for(response(), workspace=workspace)), "more than 5 files", "at most 5 files and 256 MiB"
    )
    monkeypatch.setattr(folder_module, "MAX_COPY_FILES", 10_000)
    monkeypatch.setattr(folder_module, "MAX_COPY_BYTES", 55)
    assert refusal(ctx_for(response(), workspace=workspace)).startswith(
        "the command's folder would hold more than 256 MiB"
    )
    assert refusal(ctx_for(response(files={"big.py": "x" * 56}))).startswith(
        "the command's folder would hold more than 256 MiB"
    )
    assert list(temporary.iterdir()) == []  # each refused folder was removed


def test_the_folder_is_removed_however_the_block_ends(tmp_path: Path) -> None:
    roots: list[Path] = []

    async def fail() -> None:
        async with work_folder(
            ctx_for(response(files={"a.py": "x"})), list(response(files={"a.py": "x"}).artifacts), {}
        ) as folder:
            roots.append(folder.root)
            locked = folder.work / "locked"
            write(locked / "inner.txt", "x")
            locked.chmod(stat.S_IRUSR | stat.S_IXUSR)  # a folder the command made read-only
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        anyio.run(fail)

    async def cancel() -> None:
        with anyio.move_on_after(0.2):
            async with work_folder(ctx_for(response()), [], {}) as folder:
                roots.append(folder.root)
                await anyio.sleep(10)

    anyio.run(cancel)
    assert len(roots) == 2 and not any(root.exists() for root in roots)


def test_an_artifact_path_has_at_most_64_parts() -> None:
    message = refusal(ctx_for(response(files={"d/" * 64 + "x.py": "x"})))
    assert "has 65 parts; ATP takes at most 64; ATP places the agent's files" in message
    assert folder_of(ctx_for(response(files={"d/" * 63 + "x.py": "x"})))["texts"] == {"d/" * 63 + "x.py": "x"}


def test_of_several_artifacts_with_one_path_the_last_is_used_and_said(tmp_path: Path) -> None:
    resp = response(
        artifacts=[
            FileArtifact(path="a.py", content="first"),
            FileArtifact(path="b.py", content="b"),
            FileArtifact(path="./a.py", content="second"),
            FileArtifact(path="x/../a.py", content="third"),
        ]
    )
    made = folder_of(ctx_for(resp))
    assert made["texts"] == {"a.py": "third", "b.py": "b"}
    assert made["folder"].placed == ["a.py", "b.py"]
    assert made["folder"].duplicates == ("a.py (3 artifacts; the last was used)",)


def test_with_path_only_the_selected_files_of_the_workspace_are_copied(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    write(workspace / "conftest.py", "import sys; sys.exit(0)\n")
    write(workspace / "pkg" / "mod.py", "M = 1\n")
    resp = response(
        artifacts=[
            FileArtifact(path="solution.py"),
            ReferenceArtifact(path=str(workspace / "pkg" / "mod.py")),
        ]
    )
    made = folder_of(ctx_for(resp, workspace=workspace), {"test_solution.py": "t"}, whole_workspace=False)
    assert made["texts"] == {"solution.py": GOOD, "pkg/mod.py": "M = 1\n", "test_solution.py": "t"}
    assert made["folder"].skipped == 0  # (the workspace was not walked)
    whole = folder_of(ctx_for(resp, workspace=workspace), whole_workspace=True)
    assert "conftest.py" in whole["texts"]
    message = refusal(
        ctx_for(response(artifacts=[FileArtifact(path="linked/secret.txt")]), workspace=workspace)
    )
    assert message.startswith("linked/secret.txt is outside the workspace")


def test_too_many_artifacts_are_refused_before_any_is_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(folder_module, "MAX_COPY_FILES", 3)

    def never(*_: Any) -> Any:
        raise AssertionError("resolve() was called")

    monkeypatch.setattr(folder_module, "resolve", never)
    resp = response(artifacts=[ReferenceArtifact(path=f"f{i}.py") for i in range(4)])
    says(refusal(ctx_for(resp)), "4 file artifacts", "at most 3 files")


def test_paths_are_resolved_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "solution.py", GOOD)
    threads: list[threading.Thread] = []
    real = folder_module.resolve

    def spied(path: str, ctx: EvalContext) -> Any:
        threads.append(threading.current_thread())
        return real(path, ctx)

    monkeypatch.setattr(folder_module, "resolve", spied)
    folder_of(ctx_for(response(artifacts=[FileArtifact(path="solution.py")]), agent_dir=tmp_path))
    assert threads and threads[0] is not threading.main_thread()


def nest(top: Path, depth: int) -> None:
    """``depth`` nested folders ``d`` in ``top`` (made relative to each other: the whole path
    would be too long for the system), with a file and a link leading out at the bottom."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.symlink(str(top.parent / "outside"), "out", dir_fd=fd)
        os.fchmod(fd, 0o500)  # read-only, as a command may leave it
    finally:
        os.close(fd)


def test_a_deeply_nested_folder_is_removed_without_recursion_or_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "keep.txt", "kept")
    top = tmp_path / "top"
    top.mkdir()
    nest(top, 3000)
    os.symlink(outside, top / "link")
    _remove_tree(top)
    assert not top.exists() and (outside / "keep.txt").read_text() == "kept"


def test_the_folder_is_removed_after_the_command_nested_folders_in_it(tmp_path: Path) -> None:
    async def deep() -> Path:
        async with work_folder(ctx_for(response()), [], {}) as folder:
            nest(folder.work, 1500)
            return folder.root

    root = anyio.run(deep)
    assert not root.exists()


# --- isolation and killing ------------------------------------------------------------------


def test_a_probe_that_timed_out_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [
        (Isolation((), "unshare did not finish within 2 s"), False),
        (Isolation(("/usr/bin/unshare", "--net")), True),
    ]
    calls = []

    async def probe() -> Any:
        calls.append(1)
        return answers[len(calls) - 1]

    monkeypatch.setattr(command_module, "_isolation", None)
    monkeypatch.setattr(command_module, "_probe", probe)
    assert anyio.run(isolation).why == "unshare did not finish within 2 s"
    assert anyio.run(isolation).prefix == ("/usr/bin/unshare", "--net")
    assert anyio.run(isolation).prefix == ("/usr/bin/unshare", "--net")
    assert len(calls) == 2 and PROBE_SECONDS <= 2


def test_a_reaped_command_is_never_signalled(monkeypatch: pytest.MonkeyPatch) -> None:
    popen = subprocess.Popen(["true"], stdout=subprocess.PIPE, start_new_session=True)
    command = _Command(popen, "0" * 16)
    deadline = time.monotonic() + 10
    while not command.exited() and time.monotonic() < deadline:
        time.sleep(0.01)
    signals: list[tuple[str, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: signals.append(("group", pid)))
    monkeypatch.setattr(os, "kill", lambda pid, sig: signals.append(("process", pid)))
    command.kill()  # ended, not yet reaped: its pid still names it and its group
    assert signals == [("group", popen.pid), ("process", popen.pid)]
    assert command.reap() == 0
    signals.clear()
    command.kill()
    assert signals == []  # reaped: its pid may name another process now
    command.close()


def test_the_trampoline_sets_the_limits_asked_for() -> None:
    config = convert({"command": ["true"], "max_memory_mb": 100, "max_file_mb": 0}, CustomCommandConfig)
    argv = trampoline(config)
    assert argv[:4] == [sys.executable, "-I", "-S", "-c"] and argv[-1] == "--"
    assert argv[5:-1] == [str(os.getpid()), "CORE=0", "NOFILE=4096", f"AS={100 * 1024 * 1024}"]
    assert signal.SIGKILL == 9  # (what the trampoline asks for, as a number)
