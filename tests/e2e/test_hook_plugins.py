"""Lifecycle hooks are called through pluggy: third-party plugins installed as packages (an
``atp`` entry point in their ``.dist-info``) get wrappers (``wrapper=True``, ``hookwrapper=True``)
and ``tryfirst``/``trylast`` ordering as pytest plugins do; an implementation that raises,
a wrapper included, is named and isolated while the others and the suite go on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_buggy_plugins import PASSING, atp, install, suite

WRAPPER = """
import os

from atp.core.hookspecs import hookimpl


def log(line):
    with open(os.environ["HOOK_LOG"], "a") as out:
        out.write(line + "\\n")


@hookimpl(wrapper=True)
def atp_run_finished(result):
    log(f"wrapper before {result.test_id}#{result.run_number}")
    returned = yield
    log(f"wrapper after {result.test_id}#{result.run_number} saw {len(returned)} results")
    return returned
"""

OLD_WRAPPER = """
import os

from atp.core.hookspecs import hookimpl


@hookimpl(hookwrapper=True)
def atp_run_finished(result):
    with open(os.environ["HOOK_LOG"], "a") as out:
        out.write(f"old wrapper before {result.test_id}#{result.run_number}\\n")
    outcome = yield
    outcome.get_result()
    with open(os.environ["HOOK_LOG"], "a") as out:
        out.write(f"old wrapper after {result.test_id}#{result.run_number}\\n")
"""

FIRST = """
import os

from atp.core.hookspecs import hookimpl


@hookimpl(tryfirst=True)
def atp_run_finished(result):
    with open(os.environ["HOOK_LOG"], "a") as out:
        out.write(f"tryfirst {result.test_id}#{result.run_number}\\n")
    return "first"
"""

LAST = """
import os

from atp.core.hookspecs import hookimpl


@hookimpl(trylast=True)
def atp_run_finished(result):
    with open(os.environ["HOOK_LOG"], "a") as out:
        out.write(f"trylast {result.test_id}#{result.run_number}\\n")
    raise RuntimeError("the last one broke")
"""

BROKEN_BEFORE = """
from atp.core.hookspecs import hookimpl


@hookimpl(wrapper=True)
def atp_run_finished(result):
    raise ValueError("broken before its yield")
    yield
"""

BROKEN_AFTER = """
from atp.core.hookspecs import hookimpl


@hookimpl(wrapper=True)
def atp_test_finished(result):
    yield
    raise KeyError("broken after its yield")
"""

TWO_RUNS = PASSING.replace(
    'task: {description: "answer"}', 'runs_per_test: 2\n    task: {description: "answer"}'
) + ('  - id: other\n    task: {description: "answer"}\n')


def run_with(tmp_path: Path, plugins: dict[str, str]) -> tuple[object, list[str]]:
    for name, text in plugins.items():
        install(tmp_path / "site", name, text)
    suite(tmp_path, TWO_RUNS)
    log = tmp_path / "hooks.log"
    import os

    os.environ["HOOK_LOG"] = str(log)
    try:
        result = atp(tmp_path, "test", "--output=json", "--output-file=out.json")
    finally:
        del os.environ["HOOK_LOG"]
    return result, log.read_text().splitlines() if log.exists() else []


def test_wrappers_and_ordering_of_installed_plugins_hold_for_every_run(tmp_path: Path) -> None:
    result, lines = run_with(
        tmp_path,
        {"atp-wrap": WRAPPER, "atp-old-wrap": OLD_WRAPPER, "atp-first": FIRST, "atp-last": LAST},
    )
    runs = ["fine#1", "fine#2", "other#1"]
    expected = [
        line
        for run in runs
        for line in (
            # wrappers: the last registered is outermost; then tryfirst, the plain ones, trylast
            f"wrapper before {run}",
            f"old wrapper before {run}",
            f"tryfirst {run}",
            f"trylast {run}",
            f"old wrapper after {run}",
            f"wrapper after {run} saw 1 results",  # tryfirst's "first"; trylast raised: no result
        )
    ]
    assert sorted(lines) == sorted(expected)
    for run in runs:  # within each run, in pluggy's order
        mine = [line for line in lines if line.split()[-1] == run or f" {run} " in line]
        assert mine in (
            [e for e in expected if e.split()[-1] == run or f" {run} " in e],
            # the two wrappers' nesting depends on the registration order of the entry points
            [
                f"old wrapper before {run}",
                f"wrapper before {run}",
                f"tryfirst {run}",
                f"trylast {run}",
                f"wrapper after {run} saw 1 results",
                f"old wrapper after {run}",
            ],
        ), lines
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    assert "atp_last" in result.stderr and "RuntimeError: the last one broke" in result.stderr  # type: ignore[attr-defined]
    failures = json.loads((tmp_path / "out.json").read_text())["plugin_failures"]
    assert [(f["plugin"], f["where"]) for f in failures] == [("atp_last", "atp_run_finished")]


def test_a_wrapper_raising_is_named_and_the_others_and_the_suite_go_on(tmp_path: Path) -> None:
    result, lines = run_with(
        tmp_path, {"atp-broken-before": BROKEN_BEFORE, "atp-broken-after": BROKEN_AFTER, "atp-first": FIRST}
    )
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    assert lines == ["tryfirst fine#1", "tryfirst fine#2", "tryfirst other#1"]
    stderr = result.stderr  # type: ignore[attr-defined]
    assert "atp_broken_before" in stderr and "ValueError: broken before its yield" in stderr
    assert "atp_broken_after" in stderr and "KeyError: 'broken after its yield'" in stderr
    data = json.loads((tmp_path / "out.json").read_text())
    assert {(f["plugin"], f["where"]) for f in data["plugin_failures"]} == {
        ("atp_broken_before", "atp_run_finished"),
        ("atp_broken_after", "atp_test_finished"),
    }
    assert data["summary"]["passed"] == 2 and data["summary"]["failed"] == 0
