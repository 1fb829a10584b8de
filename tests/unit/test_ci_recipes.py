"""The CI recipes in examples/ci/ (docs/ci.md): valid YAML whose `atp` commands exist with the
options they use, whose reporters are installed, whose reports are the files the CI steps
publish, and whose `pip install` names ATP's own distributions."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from atp.cli.main import cli
from atp.core.plugins import Plugins

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "examples" / "ci"
DISTRIBUTIONS = {
    found.group(1)
    for folder in ROOT.glob("atp-*")
    if (folder / "pyproject.toml").is_file()
    and (found := re.search(r'^name = "([^"]+)"', (folder / "pyproject.toml").read_text(), re.M))
}
CLUSTER_ONLY = {"atp-executors"}
"""Distributions a CI job that runs its suite in place does not need (docs/cluster.md)."""


def github_commands(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def gitlab_commands(pipeline: dict[str, Any]) -> list[str]:
    return [line for job in pipeline.values() if isinstance(job, dict) for line in job.get("script", [])]


def recipes() -> dict[str, tuple[dict[str, Any], list[str]]]:
    github = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    gitlab = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())
    return {
        "github-actions.yml": (github, github_commands(github)),
        "gitlab-ci.yml": (gitlab, gitlab_commands(gitlab)),
    }


def atp_invocations(commands: list[str]) -> list[list[str]]:
    return [words[1:] for words in map(shlex.split, commands) if words and words[0] == "atp"]


def options_of(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def reports(invocation: list[str]) -> dict[str, str]:
    """The files of the ``--output=NAME:FILE`` options of an invocation, by reporter."""
    written = {}
    for word in invocation:
        if word.startswith("--output="):
            name, _, file = word.removeprefix("--output=").partition(":")
            written[name] = file
    return written


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_every_atp_command_exists_with_its_options(recipe: str) -> None:
    _, commands = recipes()[recipe]
    invocations = atp_invocations(commands)
    assert invocations, f"{recipe} runs no atp command"
    registered = Plugins().reporters
    ctx = click.Context(cli)
    for invocation in invocations:
        command = cli.get_command(ctx, invocation[0])
        assert command is not None, f"{recipe}: atp {invocation[0]} is not a command"
        known = options_of(command)
        for word in invocation[1:]:
            if word.startswith("-"):
                assert word.split("=", 1)[0] in known, f"{recipe}: atp {invocation[0]} has no option {word}"
        for name in reports(invocation):
            assert name in registered, f"{recipe}: no reporter {name!r} is installed"


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_pip_installs_atps_own_distributions(recipe: str) -> None:
    _, commands = recipes()[recipe]
    installs = [shlex.split(c)[2:] for c in commands if c.startswith("pip install")]
    assert installs
    for names in installs:
        assert set(names) == DISTRIBUTIONS - CLUSTER_ONLY, (names, DISTRIBUTIONS)


def test_github_publishes_the_reports_the_suite_writes() -> None:
    workflow, commands = recipes()["github-actions.yml"]
    written = reports(atp_invocations(commands)[0])
    steps = workflow["jobs"]["atp"]["steps"]
    junit = next(s for s in steps if s.get("uses", "").startswith("mikepenz/action-junit-report"))
    assert junit["with"]["report_paths"] == written["junit"]
    artifact = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    paths = artifact["with"]["path"].split()
    assert written["html"] in paths and ".atp/runs/" in paths
    # the reports are kept when the tests fail (exit code 1), not only when they pass
    assert "!cancelled()" in junit["if"] and "!cancelled()" in artifact["if"]


def test_gitlab_keeps_the_reports_the_suite_writes() -> None:
    pipeline, commands = recipes()["gitlab-ci.yml"]
    written = reports(atp_invocations(commands)[0])
    artifacts = pipeline["atp"]["artifacts"]
    assert artifacts["reports"]["junit"] == written["junit"]
    assert written["html"] in artifacts["paths"] and ".atp/runs/" in artifacts["paths"]
    assert artifacts["when"] == "always"  # kept when the tests fail, too
