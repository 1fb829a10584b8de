"""Shared fixtures. Tests build their own plugin manager from the built-in plugin modules and
do not load installed entry points unless they mean to (tests/e2e runs the real `atp`)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from atp.core.plugins import Plugins
from atp.core.testing import FunctionAdapterPlugin

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
AGENTS = ROOT / "tests" / "agents"
EXAMPLES = ROOT / "examples"
PYTHON = sys.executable
ATP = str(Path(sys.executable).parent / "atp")

BUILTIN_PLUGIN_MODULES = {
    "adapters": "atp.adapters.plugin",
    "evaluators": "atp.evaluators.plugin",
    "reporters": "atp.reporters.plugin",
    "executors": "atp.executors.plugin",
}


def builtin_plugins(test_helpers: bool = True) -> Plugins:
    """The built-in plugins; with ``test_helpers``, also the kernel's in-process fake agent
    adapter (``type: function``)."""
    import importlib

    plugins = Plugins(entry_points=False)
    for name, module in BUILTIN_PLUGIN_MODULES.items():
        plugins.register(importlib.import_module(module), name=name)
    if test_helpers:
        plugins.register(FunctionAdapterPlugin(), name="function-adapter")
    return plugins


SLOW_FOLDERS = ("integration", "e2e", "browser")
"""Tests that start real processes, servers, engines or browsers: each takes seconds, so they
are marked ``slow`` (``pytest -m "not slow"`` runs the unit and contract tests, each under a
second, in well under a minute)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.path)).parent.name in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def plugins() -> Iterator[Plugins]:
    yield builtin_plugins()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def behave_agent(mode: str, *args: str) -> list[str]:
    """The command of the test agent tests/agents/behave.py in ``mode``."""
    return [PYTHON, str(AGENTS / "behave.py"), mode, *args]
