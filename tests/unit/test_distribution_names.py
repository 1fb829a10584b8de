"""The distribution names are the ones users install and plugins depend on: a name changed in a
pyproject.toml without the docs (or the other way round) fails here."""

from __future__ import annotations

import re
import sys

import pytest

from atp.cli.commands.info import DISTRIBUTIONS
from tests.conftest import EXAMPLES, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FOLDERS = ("atp-core", "atp-adapters", "atp-evaluators", "atp-reporters", "atp-executors", "atp-cli")


def names() -> dict[str, str]:
    return {
        folder: tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]["name"]
        for folder in FOLDERS
    }


def test_atp_version_lists_every_distribution_by_its_published_name() -> None:
    assert tuple(names().values()) == DISTRIBUTIONS


def test_the_docs_name_every_distribution() -> None:
    table = (ROOT / "docs" / "development.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for folder, name in names().items():
        assert f"| `{folder}/` | `{name}` |" in table
        assert f"| `{name}`" in readme
    core = names()["atp-core"]
    plugin_doc = (ROOT / "docs" / "plugins.md").read_text()
    assert f'"{core}>=' in plugin_doc


@pytest.mark.parametrize("folder", FOLDERS[1:])
def test_distributions_depend_on_the_kernel_by_its_name(folder: str) -> None:
    core = names()["atp-core"]
    deps = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(re.match(rf"{re.escape(core)}\b", d) for d in deps), deps


def test_the_example_plugin_depends_on_the_kernel_by_its_name() -> None:
    core = names()["atp-core"]
    deps = tomllib.loads((EXAMPLES / "atp-evaluator-wordcount" / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    assert any(d.startswith(core) for d in deps), deps


def test_the_core_name_is_not_the_one_taken_on_the_package_index() -> None:
    assert names()["atp-core"] != "atp-core"  # an unrelated project publishes atp-core
