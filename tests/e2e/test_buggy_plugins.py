"""Buggy third-party plugins, installed as packages (found through the ``atp`` entry-point group,
not registered in-process), against the real ``atp``: each misbehaviour makes one run an error or
stops ATP with a plugin error, named, while the other tests' results stay intact."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ATP, write

PASSING = """
  - id: fine
    task: {description: "answer"}
    assertions:
      - {type: artifact_exists, config: {name: result}}
"""


def install(site: Path, name: str, module_text: str, entry: str | None = None) -> None:
    """An installed distribution as pip lays one out: the module and its ``.dist-info`` with
    the ``atp`` entry point."""
    module = name.replace("-", "_")
    write(site / f"{module}.py", textwrap.dedent(module_text))
    info = site / f"{module}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[atp]\n{entry or module} = {module}\n")


def atp(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(tmp_path / "site")}
    return subprocess.run([ATP, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def suite(tmp_path: Path, tests: str, agent: str = "python", extra: str = "") -> Path:
    agents = {
        "python": "type: python\n    callable: agent_fn:answer",
        "buggy": "type: buggy",
    }[agent]
    write(tmp_path / "site" / "agent_fn.py", AGENT_FN)
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: plugins\nagents:\n  - name: agent\n    {agents}\n{extra}tests:\n{tests}",
    )


AGENT_FN = """
from atp.core.protocol import ATPResponse, Metrics, StructuredArtifact


def answer(request, emit):
    return ATPResponse(version="1.0", task_id=request.task_id, status="completed",
                       artifacts=[StructuredArtifact(name="result", data={"text": "hello"})],
                       metrics=Metrics())
"""

EVALUATORS = """
import time

from atp.core.evaluator import Evaluator, check
from atp.core.hookspecs import hookimpl
from atp.core.results import Check


class ReturnsTrue(Evaluator):
    name = "returns_true"

    async def evaluate(self, ctx, config):
        return True


class ReturnsDicts(Evaluator):
    name = "returns_dicts"

    async def evaluate(self, ctx, config):
        return [{"passed": True}]


class NeverReturns(Evaluator):
    name = "never_returns"

    async def evaluate(self, ctx, config):
        import anyio
        await anyio.sleep(3600)


class Plain(Evaluator):
    name = "plain"

    def evaluate(self, ctx, config):
        time.sleep(0.05)
        return [check("plain", True, "checked in a thread")]


@hookimpl
def atp_register_evaluators(register):
    for cls in (ReturnsTrue, ReturnsDicts, NeverReturns, Plain):
        register(cls)
"""


@pytest.fixture
def evaluators(tmp_path: Path) -> Path:
    install(tmp_path / "site", "atp-buggy-evaluators", EVALUATORS)
    return tmp_path


def test_evaluators_returning_garbage_or_never_returning_error_their_run_only(evaluators: Path) -> None:
    tests = PASSING + "".join(
        f"  - id: {kind}\n    task: {{description: x}}\n    assertions:\n      - {{type: {kind}}}\n"
        for kind in ("returns_true", "returns_dicts", "never_returns", "plain")
    )
    suite(evaluators, tests)
    write(evaluators / "atp.config.yaml", "evaluators:\n  never_returns: {timeout_seconds: 0.5}\n")
    result = atp(evaluators, "test", "--output=json", "--output-file=out.json")
    assert result.returncode == 1, result.stderr  # tests errored: 1, not a crash
    assert "Traceback" not in result.stderr
    data = json.loads((evaluators / "out.json").read_text())
    status = {t["id"]: t["status"] for t in data["tests"]}
    assert status == {
        "fine": "passed",
        "returns_true": "error",
        "returns_dicts": "error",
        "never_returns": "error",
        "plain": "passed",
    }
    messages = {t["id"]: t["runs"][0]["checks"][0]["message"] for t in data["tests"]}
    owner = "plugin 'atp_buggy_evaluators' (atp-buggy-evaluators 0.1.0)"
    assert (
        messages["returns_true"]
        == f"evaluator 'returns_true' of {owner} returned bool True, not a list of Check"
    )
    assert messages["returns_dicts"] == (
        f"evaluator 'returns_dicts' of {owner} returned a list whose item 0 is dict {{'passed': True}}, not a Check"
    )
    assert messages["never_returns"] == (
        "evaluator 'never_returns' did not finish within 0.5 s (evaluators.never_returns.timeout_seconds)"
    )


ADAPTER = """
from atp.core.adapter import Adapter
from atp.core.hookspecs import hookimpl


class Buggy(Adapter):
    type = "buggy"

    async def execute(self, request, sink):
        kind = request.task.description
        if kind == "dict":
            return {"status": "completed"}
        if kind == "none":
            return None
        raise ZeroDivisionError("division by zero")


@hookimpl
def atp_register_adapters(register):
    register(Buggy)
"""


def test_an_adapter_returning_a_dict_or_none_or_raising_errors_each_run(tmp_path: Path) -> None:
    install(tmp_path / "site", "atp-buggy-adapter", ADAPTER)
    tests = "".join(
        f"  - id: {kind}\n    task: {{description: {kind}}}\n" for kind in ("dict", "none", "raise")
    )
    suite(tmp_path, tests, agent="buggy")
    result = atp(tmp_path, "test", "--output=json", "--output-file=out.json", "--debug")
    assert result.returncode == 1, result.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    errors = {t["id"]: (t["status"], t["runs"][0]["error"]) for t in data["tests"]}
    owner = "adapter 'buggy' of plugin 'atp_buggy_adapter' (atp-buggy-adapter 0.1.0)"
    assert errors == {
        "dict": ("error", f"{owner} returned dict {{'status': 'completed'}}, not an ATPResponse"),
        "none": ("error", f"{owner} returned None, not an ATPResponse"),
        "raise": ("error", f"{owner} raised ZeroDivisionError: division by zero"),
    }
    # --debug shows the adapter's traceback, and the JSON results keep it
    assert 'raise ZeroDivisionError("division by zero")' in data["tests"][2]["runs"][0]["traceback"]
    assert "atp: debug: traceback of test 'raise' run 1: the adapter:" in result.stderr
    assert 'raise ZeroDivisionError("division by zero")' in result.stderr


REPORTER = """
from atp.core.hookspecs import hookimpl
from atp.core.reporter import Reporter


class Broken(Reporter):
    name = "broken"

    def report(self, results, store):
        raise RuntimeError("template missing")


@hookimpl
def atp_register_reporters(register):
    register(Broken)
"""


def test_a_reporter_that_raises_is_named_and_the_others_still_write(tmp_path: Path) -> None:
    install(tmp_path / "site", "atp-broken-reporter", REPORTER)
    suite(tmp_path, PASSING)
    result = atp(
        tmp_path, "test", "--output=broken", "--output=console", "--output=json", "--output-file=out.json"
    )
    assert result.returncode == 3, result.stderr  # the tests passed, a reporter failed
    assert "Traceback" not in result.stderr
    assert (
        "atp: plugin error: reporter 'broken' of plugin 'atp_broken_reporter' (atp-broken-reporter 0.1.0) "
        "failed: RuntimeError: template missing; the other reporters' output stands"
    ) in result.stderr
    assert "Summary: 1 passed" in result.stdout
    assert json.loads((tmp_path / "out.json").read_text())["summary"]["passed"] == 1


SHADOW = """
import msgspec

from atp.core.evaluator import Evaluator, check
from atp.core.hookspecs import hookimpl


class AnyPattern(msgspec.Struct):
    pattern: str = ""


class AlwaysPasses(Evaluator):
    name = "contains"
    Config = AnyPattern

    async def evaluate(self, ctx, config):
        return [check("contains", True, "sure")]


@hookimpl
def atp_register_evaluators(register):
    register(AlwaysPasses)
"""

FAILING_CONTAINS = """
  - id: strict
    task: {description: x}
    assertions:
      - {type: contains, config: {pattern: "not in the answer"}}
"""


def test_a_plugin_cannot_silently_replace_a_built_in(tmp_path: Path) -> None:
    # named to sort (and load) before the built-in evaluators
    install(tmp_path / "site", "aaa-shadow", SHADOW, entry="aaa")
    suite(tmp_path, FAILING_CONTAINS)
    result = atp(tmp_path, "test")
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "assertion type 'contains' cannot be used: evaluator 'contains' is registered by plugin 'aaa' (aaa-shadow 0.1.0) and plugin 'evaluators' (atp-evaluators"
        in result.stderr
    )
    # a suite that does not use the name runs as usual
    suite(tmp_path, PASSING)
    assert atp(tmp_path, "test").returncode == 0
    # disabling one plugin settles it: the built-in check fails the test
    suite(tmp_path, FAILING_CONTAINS)
    env_result = subprocess.run(
        [ATP, "test"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "NO_COLOR": "1",
            "PYTHONPATH": str(tmp_path / "site"),
            "ATP_DISABLE_PLUGINS": "aaa",
        },
    )
    assert env_result.returncode == 1, env_result.stderr


def test_a_declared_replacement_is_used(tmp_path: Path) -> None:
    install(
        tmp_path / "site",
        "aaa-shadow",
        SHADOW.replace('name = "contains"', 'name = "contains"\n    replaces = "evaluators"'),
        entry="aaa",
    )
    suite(tmp_path, FAILING_CONTAINS)
    result = atp(tmp_path, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "contains" not in result.stderr


DIAGNOSTICS = """
from atp.core.hookspecs import hookimpl


def atp_register_evaluators(register):  # @hookimpl forgotten
    raise AssertionError("never called")


@hookimpl
def atp_run_finished(result):
    raise ValueError("progress bar broke")
"""


def test_plugin_author_diagnostics(tmp_path: Path) -> None:
    install(tmp_path / "site", "atp-diagnostics", DIAGNOSTICS)
    suite(tmp_path, PASSING)
    result = atp(tmp_path, "test", "--output=json", "--output-file=out.json", "--debug")
    assert result.returncode == 0, result.stderr  # a lifecycle hook's failure does not fail tests
    assert (
        "atp: warning: plugin 'atp_diagnostics': defines atp_register_evaluators() but it is not marked "
        "@hookimpl, so ATP never calls it (from atp.core.hookspecs import hookimpl)"
    ) in result.stderr
    assert (
        "atp: warning: plugin 'atp_diagnostics' (atp-diagnostics 0.1.0) raised in its atp_run_finished hook: "
        "ValueError: progress bar broke (the run goes on)"
    ) in result.stderr
    assert 'raise ValueError("progress bar broke")' in result.stderr  # --debug: the traceback
    (failure,) = json.loads((tmp_path / "out.json").read_text())["plugin_failures"]
    assert (failure["plugin"], failure["where"], failure["message"]) == (
        "atp_diagnostics",
        "atp_run_finished",
        "ValueError: progress bar broke",
    )
    assert 'raise ValueError("progress bar broke")' in failure["traceback"]


def test_an_unknown_type_whose_plugin_failed_shows_the_failure(tmp_path: Path) -> None:
    install(tmp_path / "site", "atp-wordcount-broken", "import no_such_dependency_xyz\n")
    suite(tmp_path, "  - id: t\n    task: {description: x}\n    assertions:\n      - {type: wordcount}\n")
    result = atp(tmp_path, "test")
    assert result.returncode == 2, result.stderr
    assert "unknown assertion type 'wordcount'" in result.stderr
    assert (
        "plugin 'atp_wordcount_broken' (atp-wordcount-broken 0.1.0): failed to load: ModuleNotFoundError: "
        "No module named 'no_such_dependency_xyz'"
    ) in result.stderr
    assert "is the plugin that provides it installed" not in result.stderr


def test_a_plugin_command_that_breaks_is_a_plugin_error_not_a_traceback(tmp_path: Path) -> None:
    install(
        tmp_path / "site",
        "atp-bad-command",
        """
from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_commands(cli):
    raise RuntimeError("click version mismatch")
""",
    )
    result = atp(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert "Run a suite against an agent." in result.stdout
    assert (
        "atp: warning: plugin 'atp_bad_command' (atp-bad-command 0.1.0) could not add its commands: "
        "RuntimeError: click version mismatch"
    ) in result.stderr


LOCAL = """
from atp.core.evaluator import Evaluator, check
from atp.core.hookspecs import hookimpl


class HouseStyle(Evaluator):
    name = "house_style"

    async def evaluate(self, ctx, config):
        text = str(ctx.response.artifacts[0].data)
        return [check("house_style", "hello" in text, f"checked {len(text)} characters")]


@hookimpl
def atp_register_evaluators(register):
    register(HouseStyle)
"""


def test_local_plugins_from_the_config_load_like_installed_ones(tmp_path: Path) -> None:
    write(tmp_path / "checks" / "house.py", LOCAL)
    write(tmp_path / "atp.config.yaml", "plugins:\n  - checks/house.py\n")
    suite(
        tmp_path, "  - id: styled\n    task: {description: x}\n    assertions:\n      - {type: house_style}\n"
    )
    result = atp(tmp_path, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    listed = atp(tmp_path, "list-evaluators")
    assert listed.returncode == 0 and "house_style" in listed.stdout
    assert "checks/house.py" in atp(tmp_path, "plugins").stdout
    # a local plugin that fails to import is named, and the rest keeps working
    write(tmp_path / "checks" / "house.py", "import no_such_module_for_house\n")
    broken = atp(tmp_path, "test")
    assert broken.returncode == 2
    assert (
        "checks/house.py" in broken.stderr and "No module named 'no_such_module_for_house'" in broken.stderr
    )
