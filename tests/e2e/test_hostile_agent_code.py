"""Agent code in ATP's process raising what is not an ``Exception`` (issue 26, kind 4): the run
it raised in fails with what it raised, named; the other tests' runs are made and kept; ATP's
own time limit still cancels."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ATP, write
from tests.facts import says

AGENTS = """
import asyncio, sys


class Weird(BaseException):
    pass


RAISED = {
    "cancel": asyncio.CancelledError,
    "interrupt": KeyboardInterrupt,
    "exit": lambda: SystemExit(3),
    "weird": lambda: Weird("odd"),
    "generator": GeneratorExit,
}


def ok(description):
    return {"status": "completed", "artifacts": [{"type": "structured", "name": "r", "data": {"d": description}}], "metrics": {}}


def sync_agent(request, emit):
    what = request.task.description
    if what in RAISED:
        raise RAISED[what]()
    return ok(what)


async def async_agent(request, emit):
    what = request.task.description
    if what == "hang":
        await asyncio.sleep(60)
    if what in RAISED:
        raise RAISED[what]()
    return ok(what)
"""

IMPORT_RAISES = """
raise KeyboardInterrupt


def run(request, emit):
    return {"status": "completed"}
"""

KINDS = ["cancel", "interrupt", "exit", "weird", "generator"]


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)  # the agent's module is found through the suite's folder
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def suite(tmp_path: Path, callable_: str, descriptions: list[str]) -> Path:
    tests = "".join(
        f"  - id: t_{what}\n    task: {{description: {what}}}\n    constraints: {{timeout_seconds: 2}}\n"
        for what in descriptions
    )
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: hostile\nagents:\n  - name: agent\n    type: python\n    callable: {callable_!r}\n"
        f"tests:\n{tests}",
    )


def results(tmp_path: Path) -> dict[str, dict[str, object]]:
    [run_dir] = (tmp_path / ".atp" / "runs").iterdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {record["test_id"]: record for record in map(json.loads, lines) if "test_id" in record}


@pytest.mark.parametrize("callable_", ["agents:sync_agent", "agents:async_agent"])
def test_whatever_agent_code_raises_fails_its_own_run_only(tmp_path: Path, callable_: str) -> None:
    write(tmp_path / "agents.py", AGENTS)
    suite(tmp_path, callable_, [*KINDS, "fine"])

    done = atp("test", "suite.yaml", cwd=tmp_path)

    assert done.returncode == 1, (
        done.stdout + done.stderr
    )  # failures, not an interruption (130) or a crash (4)
    assert "Traceback" not in done.stderr
    runs = results(tmp_path)
    assert runs["t_fine"]["outcome"] == "passed"
    for what, name in zip(
        KINDS,
        ["CancelledError", "KeyboardInterrupt", "sys.exit(3)", "Weird: odd", "GeneratorExit"],
        strict=True,
    ):
        run = runs[f"t_{what}"]
        assert run["outcome"] == "failed", (what, run)
        says(str(run["error"]), callable_, name)
    says(done.stdout, "1 passed", f"{len(KINDS)} failed")


def test_atps_own_time_limit_still_cancels_an_agent(tmp_path: Path) -> None:
    write(tmp_path / "agents.py", AGENTS)
    suite(tmp_path, "agents:async_agent", ["hang", "fine"])

    done = atp("test", "suite.yaml", cwd=tmp_path)

    runs = results(tmp_path)
    assert runs["t_fine"]["outcome"] == "passed"
    assert runs["t_hang"]["outcome"] != "passed" and "2" in str(runs["t_hang"]["error"]), runs["t_hang"]
    assert done.returncode == 1, done.stdout + done.stderr


def test_an_agent_module_raising_keyboardinterrupt_on_import_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "agent_mod.py", IMPORT_RAISES)
    suite(tmp_path, "agent_mod:run", ["fine"])

    done = atp("test", "suite.yaml", cwd=tmp_path)

    assert done.returncode == 2, done.stdout + done.stderr  # the agent cannot be started
    says(done.stderr, "agent_mod", "KeyboardInterrupt", "agent_mod.py:1")
    assert "Traceback" not in done.stderr and "Interrupted" not in done.stdout
