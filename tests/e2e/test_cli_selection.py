"""Finding and choosing what to run as pytest users expect: ``atp test PATH...``, ``-x``,
``--last-failed``, ``--tags`` with AND, ``--version``; and the exit codes of errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import click
import pytest

from atp.cli import main as cli_main
from tests.conftest import ATP, behave_agent, write


def atp(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def suite_file(path: Path, name: str, tests: str) -> Path:
    command = behave_agent("ok")
    return write(
        path,
        f"test_suite: {name}\nagents:\n  - name: agent\n    type: cli\n    command: {command!r}\ntests:\n{tests}",
    )


def a_test(test_id: str, passes: bool = True, tags: str = "[]") -> str:
    pattern = "." if passes else "no such text anywhere"
    return (
        f"  - id: {test_id}\n    tags: {tags}\n    task: {{description: x}}\n    assertions:\n"
        f"      - {{type: contains, config: {{pattern: {pattern!r}, regex: true}}}}\n"
    )


def test_paths_take_files_and_folders_and_skip_other_yaml(tmp_path: Path) -> None:
    suite_file(tmp_path / "suites" / "a.yaml", "alpha", a_test("a1"))
    suite_file(tmp_path / "suites" / "nested" / "b.yml", "beta", a_test("b1"))
    write(tmp_path / "suites" / "atp.config.yaml", "defaults: {runs_per_test: 1}\n")  # not a suite
    write(tmp_path / "suites" / "workflow.yaml", "on: push\njobs: {}\n")
    suite_file(tmp_path / "suites" / ".hidden" / "c.yaml", "hidden", a_test("c1"))
    result = atp(tmp_path, "test", "suites")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Suite: alpha" in result.stdout and "Suite: beta" in result.stdout
    assert "hidden" not in result.stdout
    assert "Suites: 2 of 2 passed" in result.stdout
    # no PATH: the working directory is searched
    other = atp(tmp_path / "suites" / "nested", "test")
    assert other.returncode == 0 and "Suite: beta" in other.stdout


def test_several_suites_exit_with_the_worst_and_write_a_file_each(tmp_path: Path) -> None:
    good = suite_file(tmp_path / "good.yaml", "good", a_test("g"))
    bad = suite_file(tmp_path / "bad.yaml", "bad one", a_test("b", passes=False))
    result = atp(tmp_path, "test", str(good), str(bad), "--output=json", "--output-file=out.json")
    assert result.returncode == 1, result.stderr
    assert json.loads((tmp_path / "out.good.json").read_text())["summary"]["passed"] == 1
    assert json.loads((tmp_path / "out.bad_one.json").read_text())["summary"]["failed"] == 1


def test_no_suite_found_is_a_usage_error(tmp_path: Path) -> None:
    result = atp(tmp_path, "test")
    assert result.returncode == 2
    assert "no suite files in" in result.stderr and "atp init" in result.stderr


def test_fail_fast_stops_at_the_first_failure(tmp_path: Path) -> None:
    tests = a_test("one") + a_test("two", passes=False) + a_test("three") + a_test("four")
    suite_file(tmp_path / "suite.yaml", "ff", tests)
    result = atp(tmp_path, "test", "-x", "--output=json", "--output-file=out.json")
    assert result.returncode == 1
    data = json.loads((tmp_path / "out.json").read_text())
    assert [t["status"] for t in data["tests"]] == ["passed", "failed", "skipped", "skipped"]
    assert data["stopped_by"] == "fail-fast"


def test_last_failed_reruns_what_failed_in_the_latest_run_of_the_suite(tmp_path: Path) -> None:
    suite = suite_file(
        tmp_path / "suite.yaml", "lf", a_test("one") + a_test("two", passes=False) + a_test("three")
    )
    assert atp(tmp_path, "test", str(suite)).returncode == 1
    rerun = atp(tmp_path, "test", "--lf", "--output=json", "--output-file=out.json")
    assert rerun.returncode == 1
    data = json.loads((tmp_path / "out.json").read_text())
    assert [t["id"] for t in data["tests"]] == ["two"]
    assert data["summary"]["deselected"] == 2
    # fixed: the rerun passes, and the next --lf finds nothing failed and runs everything
    suite_file(tmp_path / "suite.yaml", "lf", a_test("one") + a_test("two") + a_test("three"))
    assert atp(tmp_path, "test", "--last-failed").returncode == 0
    again = atp(tmp_path, "test", "--last-failed", "--output=json", "--output-file=out.json")
    assert again.returncode == 0 and "nothing failed" in again.stderr
    assert len(json.loads((tmp_path / "out.json").read_text())["tests"]) == 3


def test_tags_and_or_not(tmp_path: Path) -> None:
    tests = (
        a_test("both", tags="[smoke, fast]")
        + a_test("smoke_only", tags="[smoke]")
        + a_test("core", tags="[core]")
    )
    suite_file(tmp_path / "suite.yaml", "tags", tests)

    def ids(*tags: str) -> list[str]:
        result = atp(
            tmp_path, "test", *[f"--tags={t}" for t in tags], "--output=json", "--output-file=out.json"
        )
        assert result.returncode == 0, result.stderr
        return [t["id"] for t in json.loads((tmp_path / "out.json").read_text())["tests"]]

    assert ids("smoke+fast") == ["both"]
    assert ids("smoke+fast,core") == ["both", "core"]
    assert ids("smoke,!fast") == ["smoke_only"]


def test_version_option() -> None:
    result = subprocess.run([ATP, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1].startswith("python ")
    assert "atp-cli 0.1.0" in result.stdout


def test_an_internal_error_exits_4_with_a_message_and_never_1(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command("explode")
    def explode() -> None:
        raise TypeError("unsupported operand")

    cli_main.cli.add_command(explode)
    try:
        assert cli_main.main(["explode"]) == 4
        err = capsys.readouterr().err
        assert "atp: internal error: TypeError: unsupported operand" in err
        assert "--debug" in err and "Traceback" not in err
        assert cli_main.main(["--debug", "explode"]) == 4
        assert "Traceback" in capsys.readouterr().err
    finally:
        cli_main.cli.commands.pop("explode", None)
        cli_main._debug = False
