"""The commands of README.md and docs/getting-started.md, taken from the docs (between their
``<!-- NAME-command -->`` markers) and run as written in fresh folders, each in a new login shell
(``bash -lc``) with a home folder of its own.

What stands in for the slow install steps, and only for them:

- the quick start's ``python3 -m venv .venv && .venv/bin/pip install ...`` is replaced by a
  ``.venv`` that is a link to the virtual environment running these tests (the steps removed are
  checked: they name the checkout's distribution folders);
- the README's ``uv tool install ...`` / ``pipx install ...`` is replaced by ``~/.local/bin/atp``,
  a link to that environment's ``atp`` (where both tools put it), and the ``~/.profile`` line
  that puts ``~/.local/bin`` on the ``PATH`` of new shells (what ``uv tool update-shell`` and
  ``pipx ensurepath`` do). The tool commands themselves were run by hand (README.md says with
  which versions); here they are checked to name folders the checkout has.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ATP, ROOT

VENV = Path(ATP).parent.parent
DISTRIBUTIONS = {"atp-core", "atp-adapters", "atp-evaluators", "atp-reporters", "atp-executors", "atp-cli"}


def commands(doc: Path, name: str) -> list[str]:
    """The lines of every ``sh`` block between ``<!-- NAME -->`` markers of ``doc``, in order."""
    text = doc.read_text()
    blocks = re.findall(rf"<!-- {name} -->\n```sh\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert blocks, f"no {name} block in {doc}"
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def shell(script: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in a new login shell, as a user who opened a terminal: the ``PATH`` is the
    system's and whatever ``~/.profile`` adds (not the test environment's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PATH")}
    env.update(HOME=str(home), NO_COLOR="1", PATH="/usr/local/bin:/usr/bin:/bin")
    return subprocess.run(
        ["bash", "-lc", f"set -e\n{script}"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def venv() -> Path:
    if not (VENV / "bin" / "activate").is_file():
        pytest.skip("the tests do not run in a virtual environment, which stands in for the install")
    return VENV


def installed_folders(step: str) -> set[str]:
    """The distribution folders an install step names (``./atp-core``, ``"$PWD/atp-core"``,
    ``'./atp-executors[dask]'``), each checked to be one of the checkout's."""
    folders = set()
    for word in shlex.split(step):
        for prefix in ("./", "$PWD/"):
            if word.startswith(prefix):
                folder = word.removeprefix(prefix).split("[")[0]
                assert (ROOT / folder / "pyproject.toml").is_file(), (
                    f"{word} in {step!r} is not a distribution"
                )
                folders.add(folder)
    return folders


def test_the_readme_quick_start_runs_as_written(tmp_path: Path, venv: Path) -> None:
    (line,) = commands(ROOT / "README.md", "quickstart-command")
    steps = line.split(" && ")
    make_venv, install, *rest = steps
    assert make_venv == "python3 -m venv .venv"
    assert install.startswith(".venv/bin/pip install ")
    assert installed_folders(install) == DISTRIBUTIONS - {"atp-executors"}
    checkout = tmp_path / "checkout"
    for folder in ("examples/quickstart", "examples/agents"):
        shutil.copytree(ROOT / folder, checkout / folder)
    (checkout / ".venv").symlink_to(venv)  # stands in for the two install steps
    result = shell(" && ".join(rest), checkout, tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed, 0 failed" in result.stdout


def test_activating_the_quick_start_venv_puts_atp_on_the_path(tmp_path: Path, venv: Path) -> None:
    (activate,) = commands(ROOT / "README.md", "activate-command")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(venv)
    before = shell("command -v atp || echo missing", checkout, tmp_path / "home")
    assert before.stdout.strip() == "missing", before.stdout  # a new shell has no atp until...
    result = shell(f"{activate}\ncommand -v atp\natp --version", checkout, tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    # the activate script names the environment by its own path (the linked one here)
    assert Path(result.stdout.splitlines()[0]).resolve() == (venv / "bin" / "atp").resolve()


def test_the_tool_install_commands_name_the_checkouts_distributions() -> None:
    uv, pipx = commands(ROOT / "README.md", "tool-install-command")
    assert uv.startswith("uv tool install ./atp-cli ")
    assert pipx.startswith('pipx install "$PWD/atp-cli" ')
    for step in (uv, pipx):
        # atp-kernel (./atp-core) is what a bare install of ./atp-cli cannot find
        assert installed_folders(step) == DISTRIBUTIONS - {"atp-executors"}, step


def test_getting_started_runs_as_written_in_a_new_shell(tmp_path: Path, venv: Path) -> None:
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "atp").symlink_to(venv / "bin" / "atp")  # stands in for uv or pipx
    (home / ".profile").write_text('PATH="$HOME/.local/bin:$PATH"\n')  # for update-shell/ensurepath
    work = tmp_path / "work"
    work.mkdir()
    found = shell("command -v atp", work, home)
    assert found.stdout.strip() == str(home / ".local" / "bin" / "atp"), found.stdout + found.stderr
    script = "\n".join(commands(ROOT / "docs" / "getting-started.md", "getting-started-command"))
    assert script.startswith("mkdir my-agent && cd my-agent\natp init\n")
    result = shell(script, work, home)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Wrote a starting point in" in out and str(work / "my-agent") in out
    assert out.count("Summary: 3 passed, 0 failed") == 4, out  # three runs and the report
    assert (work / "my-agent" / "atp.config.yaml").is_file()
    assert len(list((work / "my-agent" / ".atp" / "runs").iterdir())) == 3  # the last from ..
    assert not (work / ".atp").exists()
