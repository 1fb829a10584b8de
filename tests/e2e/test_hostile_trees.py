"""An agent that nests folders thousands deep in its workspace (issue 26, kind 3): every way ATP
removes, copies or walks that tree afterwards does so without recursion — a run taken again
by ``--resume``, ``atp merge`` of the shards, ``atp test`` finding suites in a folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atp.core.tree import remove_tree
from tests.conftest import ATP, write
from tests.e2e.test_atp_command import atp

DEPTH = 3000
AGENT = f"""
import json, os, sys, time
request = json.loads(sys.stdin.readline())
workspace = request["context"]["workspace_path"]
here = os.getcwd()
os.chdir(workspace)
for _ in range({DEPTH}):  # (one level at a time: the whole path is far beyond PATH_MAX)
    os.mkdir("d")
    os.chdir("d")
os.chdir(here)
if os.environ.get("HANG") and request["task"]["description"] == "hangs":
    open(os.environ["HANG"], "w").close()
    time.sleep(60)
print(json.dumps({{"version": "1.0", "task_id": request["task_id"], "status": "completed",
                  "artifacts": [], "metrics": {{}}}}))
"""


@pytest.fixture(autouse=True)
def removed_after(tmp_path: Path) -> Iterator[None]:
    """The trees removed by ATP's own helper: pytest's clean-up of old temporary folders
    (shutil.rmtree) would end in RecursionError on them."""
    yield
    remove_tree(tmp_path)


def suite(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "fixture" / "readme.txt", "the fixture\n")
    tests = "".join(
        f"  - id: {name}\n    task: {{description: {name}, workspace_fixture: fixture}}\n"
        for name in ("first", "hangs", "last")
    )
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: deep\nagents:\n  - name: agent\n    type: cli\n"
        f"    command: [{sys.executable!r}, agent.py]\ntests:\n{tests}",
    )


def outcomes(report: Path) -> dict[str, str]:
    data = json.loads(report.read_text())
    return {test["id"]: test["runs"][0]["outcome"] for test in data["tests"] if test["runs"]}


def test_a_deep_workspace_left_by_an_interrupted_run_is_removed_by_resume(tmp_path: Path) -> None:
    suite(tmp_path)
    hung = tmp_path / "hung"
    env = {**os.environ, "NO_COLOR": "1", "HANG": str(hung)}
    started = subprocess.Popen(
        [ATP, "test", "suite.yaml", "--parallel=1"], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not hung.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hung.exists(), "the agent never reached its hanging run"
    started.send_signal(signal.SIGINT)
    _, err = started.communicate(timeout=60)
    assert started.returncode == 130, err
    [run_dir] = (tmp_path / ".atp" / "runs").iterdir()

    resumed = atp("test", f"--resume={run_dir}", "--output=json", "--output-file=out.json", cwd=tmp_path)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "RecursionError" not in resumed.stderr
    assert outcomes(tmp_path / "out.json") == {"first": "passed", "hangs": "passed", "last": "passed"}


def test_shards_with_deep_workspaces_merge_and_suites_are_found_beside_them(tmp_path: Path) -> None:
    suite(tmp_path)
    shards = []
    for index in (1, 2):
        made = atp("test", "suite.yaml", f"--shard={index}/2", "--run-dir=shards", "--output=json",
                   f"--output-file=shard{index}.json", cwd=tmp_path)  # fmt: skip
        assert made.returncode == 0, made.stdout + made.stderr
        shards.append(
            str(tmp_path / "shards" / json.loads((tmp_path / f"shard{index}.json").read_text())["run_id"])
        )

    merged = atp("merge", *shards, "--output=json", "--output-file=merged.json", cwd=tmp_path)

    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "levels deep were left out" in merged.stderr and len(merged.stderr) < 2000  # (named, bounded)
    assert outcomes(tmp_path / "merged.json") == {"first": "passed", "hangs": "passed", "last": "passed"}
    # the deep trees lie below the working folder now: finding suites walks past them
    found = atp("test", cwd=tmp_path)  # (no suite named: the folder is searched)
    assert "RecursionError" not in found.stderr and found.returncode == 0, found.stdout + found.stderr
