"""``atp init``: the starting point it writes, what it refuses, the plugin packages (their own
tests run in tests/e2e/test_init.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from atp.cli.commands.init import CORE_DISTRIBUTION, core_requirement, init_command, plugin_names
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import ConfigError
from atp.core.plugins import Plugins
from atp.core.protocol import decode_response
from atp.core.suite import load_suite
from tests.conftest import write

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PROJECT_FILES = ("atp.config.yaml", "atp-suite.yaml", "agent.py")


def init(where: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(where)
    return CliRunner().invoke(init_command, list(args))


def test_init_writes_a_project_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugins: Plugins
) -> None:
    result = init(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    for name in (*PROJECT_FILES, ".gitignore"):
        assert (tmp_path / name).is_file()
        assert f"  {name}" in result.output
    assert "atp test" in result.output
    config = load_config(cwd=tmp_path)
    suite = load_suite(tmp_path / "atp-suite.yaml", plugins.evaluators)
    assert len(suite.tests) == 3 and suite.name == tmp_path.name.lower().replace("-", "_")
    agent = resolve_agent(agent_definitions(config, suite)["my-agent"], plugins.adapters, {})
    assert agent.settings.command == [sys.executable, "agent.py"]  # ${ATP_PYTHON}
    assert (tmp_path / ".gitignore").read_text().splitlines()[-1] == ".atp/"


def test_the_agent_answers_a_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    init(tmp_path, monkeypatch)
    request = {
        "version": "1.0",
        "task_id": "t-1",
        "task": {"description": "x", "input_data": {"topic": "cats"}},
    }
    done = subprocess.run(
        [sys.executable, "agent.py"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    response = decode_response(done.stdout.splitlines()[-1])
    assert response.status == "completed" and response.task_id == "t-1"
    assert "cats" in (response.artifacts[0].content or "")
    assert all(json.loads(line)["task_id"] == "t-1" for line in done.stderr.splitlines())


@pytest.mark.parametrize("existing", [*PROJECT_FILES, "atp.config.yml"])
def test_init_refuses_to_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: str) -> None:
    write(tmp_path / existing, "mine\n")
    result = init(tmp_path, monkeypatch)
    assert isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    assert message.startswith(f"{existing} already exists in {tmp_path}; nothing was written")
    assert "--force" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]
    assert (tmp_path / existing).read_text() == "mine\n"


def test_init_refuses_when_pyproject_configures_atp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atp]\nversion = '1.0'\n")
    result = init(tmp_path, monkeypatch)
    assert isinstance(result.exception, ConfigError)
    assert "pyproject.toml (its [tool.atp] table) already exists" in str(result.exception)


def test_force_overwrites_and_gitignore_is_not_duplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "agent.py", "mine\n")
    write(tmp_path / ".gitignore", "__pycache__/\n*.pyc")  # no newline at the end
    result = init(tmp_path, monkeypatch, "--force")
    assert result.exit_code == 0, result.output
    assert "ATP can test" in (tmp_path / "agent.py").read_text()
    assert (tmp_path / ".gitignore").read_text() == "__pycache__/\n*.pyc\n# ATP's run directories\n.atp/\n"
    result = init(tmp_path, monkeypatch, "--force")
    assert result.exit_code == 0
    assert (tmp_path / ".gitignore").read_text().count(".atp/") == 1
    assert "  .gitignore" not in result.output  # nothing added this time


def test_an_existing_ignore_of_atp_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / ".gitignore", "/.atp\n")
    assert init(tmp_path, monkeypatch).exit_code == 0
    assert (tmp_path / ".gitignore").read_text() == "/.atp\n"


def test_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = init(tmp_path, monkeypatch, "word_count")
    assert result.exit_code == 2 and "atp init --plugin evaluator word_count" in result.output
    result = init(tmp_path, monkeypatch, "--plugin", "evaluator")
    assert result.exit_code == 2 and "needs a NAME" in result.output
    result = init(tmp_path, monkeypatch, "--plugin", "judge", "x")
    assert result.exit_code == 2
    for bad in ("Word", "1st", "a b", "a--b", "x" * 51, "_x"):
        result = init(tmp_path, monkeypatch, "--plugin", "evaluator", bad)
        assert isinstance(result.exception, ConfigError), bad
        assert "must be lower-case letters and digits" in str(result.exception)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["evaluator", "adapter", "reporter"])
def test_plugin_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    result = init(tmp_path, monkeypatch, "--plugin", kind, "house-style")
    assert result.exit_code == 0, result.output
    folder = tmp_path / f"atp-{kind}-house-style"
    package = f"atp_{kind}_house_style"
    for path in (
        "pyproject.toml",
        "README.md",
        f"src/{package}/__init__.py",
        f"src/{package}/{kind}.py",
        f"tests/test_{package}.py",
    ):
        assert (folder / path).is_file(), path
        assert "__" + "NAME__" not in (folder / path).read_text()
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert project["build-system"]["build-backend"] == "hatchling.build"
    assert project["project"]["name"] == f"atp-{kind}-house-style"
    assert project["project"]["dependencies"] == [core_requirement()]
    assert project["project"]["entry-points"]["atp"] == {"house-style": package}
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [f"src/{package}"]
    for path in folder.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    again = init(tmp_path, monkeypatch, "--plugin", kind, "house-style")
    assert isinstance(again.exception, ConfigError) and "already exists" in str(again.exception)
    assert init(tmp_path, monkeypatch, "--plugin", kind, "house-style", "--force").exit_code == 0


def test_names_and_the_kernel_requirement() -> None:
    names = plugin_names("evaluator", "word_count")
    assert (names["DIST"], names["PACKAGE"], names["CLASS"]) == (
        "atp-evaluator-word-count",
        "atp_evaluator_word_count",
        "WordCountEvaluator",
    )
    assert core_requirement().startswith(f"{CORE_DISTRIBUTION}>=")
    import atp.core

    major, minor = atp.core.__version__.split(".")[:2]
    if major == "0":
        assert core_requirement() == f"{CORE_DISTRIBUTION}>=0.{minor},<0.{int(minor) + 1}"


def test_the_plugins_test_command_installs_pytest_with_the_python_that_runs_atp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ATP does not install pytest: the printed command installs the package's `test` extra
    (which has it) before running it, with the Python that runs ATP."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # an activated venv: `python` is ATP's
    if not (Path(sys.executable).parent / "python").exists():
        pytest.skip("this Python's folder has no `python`")
    result = init(tmp_path, monkeypatch, "--plugin", "evaluator", "house-style")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("Test it:"))
    assert line.endswith(
        "cd atp-evaluator-house-style && python -m pip install -e '.[test]' && python -m pytest"
    )
    project = tomllib.loads((tmp_path / "atp-evaluator-house-style" / "pyproject.toml").read_text())
    assert any(r.startswith("pytest") for r in project["project"]["optional-dependencies"]["test"])
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    write(elsewhere / "python", "#!/bin/sh\n").chmod(0o755)
    monkeypatch.setenv("PATH", str(elsewhere))  # `python` is another one: ATP's is named by its path
    again = init(tmp_path, monkeypatch, "--plugin", "adapter", "house-style")
    line = next(line for line in again.output.splitlines() if line.startswith("Test it:"))
    assert f"&& {sys.executable} -m pip install -e '.[test]' && {sys.executable} -m pytest" in line
