"""``atp init`` as a user runs it: the starting point passes ``atp test`` at once, and the plugin
packages' own tests pass, run with pytest in a process of their own, nothing installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ATP

INIT = [ATP]


def run(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def test_atp_test_passes_right_after_atp_init(tmp_path: Path) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    done = run([*INIT, "init"], project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "atp test" in done.stdout
    for args in (["test"], ["test", "--suite=atp-suite.yaml"]):
        result = run([ATP, *args], project)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Summary: 3 passed, 0 failed, 0 skipped" in result.stdout
        assert "Agent: my-agent (cli)" in result.stdout
    result = run([ATP, "test", "--tags=smoke"], project)
    assert result.returncode == 0 and "1 passed" in result.stdout and "2 deselected" in result.stdout


def test_atp_init_twice_exits_2_and_keeps_the_files(tmp_path: Path) -> None:
    assert run([*INIT, "init"], tmp_path).returncode == 0
    (tmp_path / "agent.py").write_text("# my agent\n")
    done = run([*INIT, "init"], tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(
        "atp: error: atp.config.yaml, atp-suite.yaml and agent.py already exist in "
    )
    assert "Traceback" not in done.stderr
    assert (tmp_path / "agent.py").read_text() == "# my agent\n"
    assert run([*INIT, "init", "--force"], tmp_path).returncode == 0
    assert (tmp_path / "agent.py").read_text() != "# my agent\n"


@pytest.mark.parametrize("kind", ["evaluator", "adapter", "reporter"])
def test_a_plugin_package_passes_its_own_tests(tmp_path: Path, kind: str) -> None:
    done = run([*INIT, "init", "--plugin", kind, "acme_check"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / f"atp-{kind}-acme-check"
    tests = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        folder,
        env={"PYTHONPATH": str(folder / "src")},
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert " passed" in tests.stdout and "failed" not in tests.stdout


def test_init_then_test_then_a_failing_check_shows_its_evidence(tmp_path: Path) -> None:
    """The first hour: atp init, atp test passes, a check edited to fail exits 1 and shows what
    the agent produced next to what was expected."""
    assert run([ATP, "init"], tmp_path).returncode == 0
    assert run([ATP, "test"], tmp_path).returncode == 0
    suite = tmp_path / "atp-suite.yaml"
    text = suite.read_text()
    assert 'pattern: "test suites"' in text
    suite.write_text(text.replace('pattern: "test suites"', 'pattern: "quantum chromodynamics"'))
    result = run([ATP, "test"], tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Summary: 2 passed, 1 failed, 0 skipped" in result.stdout
    failure = next(line for line in result.stdout.splitlines() if "quantum chromodynamics" in line)
    assert failure.lstrip().startswith("- contains:answer.md:")
    assert "test suites" in failure  # the evidence: an excerpt of the text that was searched
