"""Where `atp` finds its configuration, through the real command: beside the suite, then in the
working directory (atp.config.yaml, then pyproject.toml's [tool.atp]), --config over both, and
errors that name where it looked (docs/config.md, "Where ATP looks")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import AGENTS, ATP, write
from tests.facts import one_error, says

BEHAVE = AGENTS / "behave.py"
SUITE = """
test_suite: calc
tests:
  - id: adds
    task: {description: "2 + 2"}
"""


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def config_with(mode: str) -> str:
    """A config defining the agent 'calc' as tests/agents/behave.py in ``mode``."""
    return f'agents:\n  calc:\n    type: cli\n    command: ["${{ATP_PYTHON}}", {json.dumps(str(BEHAVE))}, {mode}]\n'


def test_a_suite_run_from_the_parent_folder_finds_the_config_beside_it(tmp_path: Path) -> None:
    write(tmp_path / "myproj" / "suite.yaml", SUITE)
    write(tmp_path / "myproj" / "atp.config.yaml", config_with("ok"))
    result = atp("test", "myproj/suite.yaml", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Agent: calc (cli)" in result.stdout and "✓ adds" in result.stdout
    assert "Config: myproj/atp.config.yaml (beside the suite)" in result.stdout.splitlines()
    # relative paths of the config are relative to its folder: the runs are the project's
    assert list((tmp_path / "myproj" / ".atp" / "runs").iterdir())
    assert not (tmp_path / ".atp").exists()
    # the other commands that take a suite find it too
    listed = atp("list-agents", "--suite=myproj/suite.yaml", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    says(listed.stdout, "calc", "type=cli", "myproj/atp.config.yaml")


def test_a_pyproject_tool_atp_table_beside_the_suite_is_found(tmp_path: Path) -> None:
    project = tmp_path / "myproj"
    write(project / "suite.yaml", SUITE)
    (project / "agent.py").write_bytes(BEHAVE.read_bytes())
    write(
        project / "pyproject.toml",
        """
        [project]
        name = "myproj"

        [tool.atp.agents.calc]
        type = "cli"
        command = ["${ATP_PYTHON}", "agent.py", "ok"]
        """,
    )
    # agent.py is found relative to pyproject.toml's folder, though atp runs in the parent
    result = atp("test", "myproj/suite.yaml", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✓ adds" in result.stdout


def test_no_agent_names_the_files_looked_at(tmp_path: Path) -> None:
    write(tmp_path / "myproj" / "suite.yaml", SUITE)
    result = atp("test", "myproj/suite.yaml", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 2
    one_error(
        result.stderr,
        "no agent named 'calc'",
        "none are defined",
        "no config file was found",
        "atp.config.yaml",
        "atp.config.yml",
        "pyproject.toml [tool.atp]",
        "myproj (beside the suite)",
        f"{tmp_path} (the working directory)",
    )
    # a config that is found but lacks the agent: the error names it
    write(tmp_path / "atp.config.yaml", "agents:\n  other: {type: cli, command: [x]}\n")
    result = atp("test", "myproj/suite.yaml", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, "no agent named 'calc'", "other", str(tmp_path / "atp.config.yaml"))


def test_explicit_config_wins_and_the_suites_folder_beats_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "myproj" / "suite.yaml", SUITE)
    write(tmp_path / "atp.config.yaml", config_with("crash"))
    write(tmp_path / "myproj" / "atp.config.yaml", config_with("ok"))
    result = atp("test", "myproj/suite.yaml", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # beside the suite, not cwd's
    assert "Config: myproj/atp.config.yaml (beside the suite)" in result.stdout.splitlines()
    # the working directory's config is not used, and a warning says so, once
    (warning,) = result.stderr.splitlines()
    says(warning, "atp: warning: ", tmp_path / "atp.config.yaml", "not used", "myproj/atp.config.yaml")
    write(tmp_path / "ci" / "atp.yaml", config_with("crash"))
    result = atp("test", "myproj/suite.yaml", "--agent=calc", "--config=ci/atp.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # --config named the crashing one
    assert "✗ adds" in result.stdout and "Config: ci/atp.yaml (--config)" in result.stdout.splitlines()
    assert "not used" not in result.stderr


def test_the_header_says_when_no_config_was_found(tmp_path: Path) -> None:
    write(
        tmp_path / "myproj" / "suite.yaml",
        SUITE + config_with("ok").replace("agents:\n  calc:", "agents:\n  - name: calc"),
    )
    result = atp("test", "myproj/suite.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = (line for line in result.stdout.splitlines() if line.startswith("Config: "))
    says(line, "none found", "beside the suite (myproj)", "in the working directory")


def test_baseline_compare_with_a_suite_finds_the_config_beside_it(tmp_path: Path) -> None:
    """As ``baseline save`` does: run from the parent folder, the agent of the config beside
    the suite is found."""
    write(tmp_path / "myproj" / "suite.yaml", SUITE)
    write(tmp_path / "myproj" / "atp.config.yaml", config_with("ok"))
    saved = atp(
        "baseline",
        "save",
        "--suite=myproj/suite.yaml",
        "--agent=calc",
        "--runs=3",
        "--output=b.json",
        cwd=tmp_path,
    )
    assert saved.returncode == 0, saved.stdout + saved.stderr
    compared = atp(
        "baseline", "compare", "--baseline=b.json", "--suite=myproj/suite.yaml", "--agent=calc", "--runs=3",
        cwd=tmp_path,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stdout + compared.stderr
    says(compared.stdout, "Config: myproj/atp.config.yaml (beside the suite)", "ATP Baseline Comparison")


def test_the_config_option_says_where_each_command_looks(tmp_path: Path) -> None:
    for command in (
        ["test"],
        ["validate"],
        ["compare"],
        ["baseline", "save"],
        ["baseline", "compare"],
        ["list-agents"],
    ):
        says(atp(*command, "--help", cwd=tmp_path).stdout, "beside")
    for command in (["schema"], ["report"], ["view"], ["clean"], ["merge"], ["plugins"], ["list-evaluators"]):
        text = atp(*command, "--help", cwd=tmp_path).stdout
        assert "--config" in text and "beside" not in text, (command, text)


def test_suites_that_would_find_different_configs_are_refused_before_any_run(tmp_path: Path) -> None:
    for name in ("proj_a", "proj_b"):
        write(tmp_path / name / "suite.yaml", SUITE)
        write(tmp_path / name / "atp.config.yaml", config_with("ok"))
    result = atp("test", "proj_a", "proj_b", "--agent=calc", cwd=tmp_path)
    assert result.returncode == 2
    one_error(
        result.stderr,
        "proj_a/suite.yaml",
        "proj_a/atp.config.yaml",
        "proj_b/suite.yaml",
        "proj_b/atp.config.yaml",
        "--config",
    )
    assert result.stdout == ""
    assert not (tmp_path / "proj_a" / ".atp").exists()
    # one config named for all of them runs both
    result = atp("test", "proj_a", "proj_b", "--agent=calc", "--config=proj_a/atp.config.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Suites: 2 of 2 passed" in result.stdout
