"""Every run of a process agent in a folder of its own, through `atp test` as a user runs it:
ten runs in parallel of an agent that writes, reads back and returns a file of a fixed name
(answer.md, holding its task_id) all pass, each with its own file (a cli agent, a persistent one
writing in context.workspace_path, a container); `working_folder: shared` keeps the old
behaviour; a relative command still starts; the folders of passed runs are removed unless
--keep-workspaces, those of runs that did not pass are kept."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from atp.core.store import workspace_path
from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import says

PASSING = (
    "  - id: answer\n    task: {description: write your answer}\n    assertions:\n"
    "      - {type: contains, config: {path: answer.md, pattern: '-'}}\n"  # (ATP reads the file)
)


def project(tmp_path: Path, settings: str, tests: str = PASSING) -> Path:
    """A suite whose agent is answer_file.py copied into ``agent/`` and started by a relative
    command from there (``cwd: agent``)."""
    (tmp_path / "agent").mkdir()
    shutil.copy(AGENTS / "answer_file.py", tmp_path / "agent" / "answer_file.py")
    return write(
        tmp_path / "suite.yaml",
        "test_suite: folders\nagents:\n  - name: agent\n    type: cli\n"
        f"    command: [{PYTHON!r}, answer_file.py]\n    cwd: agent\n{settings}"
        f"defaults: {{runs_per_test: 10}}\ntests:\n{tests}",
    )


def atp(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, "test", "suite.yaml", "--run-dir=runs", "--output=json", "--output-file=out.json", *args],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def runs_of(tmp_path: Path) -> list[dict[str, Any]]:
    return [run for test in json.loads((tmp_path / "out.json").read_text())["tests"] for run in test["runs"]]


def run_dir(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "runs").iterdir()
    return found


def kept(tmp_path: Path) -> list[str]:
    """The run folders left in the run directory."""
    workspaces = run_dir(tmp_path) / "workspaces"
    return sorted(p.name for p in workspaces.iterdir()) if workspaces.exists() else []


def seen(run: dict[str, Any]) -> dict[str, Any]:
    (data,) = (a["data"] for a in run["artifacts"] if a["type"] == "structured")
    return data  # type: ignore[no-any-return]


def assert_each_run_had_its_own_file(runs: list[dict[str, Any]]) -> None:
    assert len(runs) == 10 and [r["outcome"] for r in runs] == ["passed"] * 10, [r["error"] for r in runs]
    assert len({r["task_id"] for r in runs}) == 10
    for run in runs:
        # what the agent read back, and the file ATP checked (the declared hash of the task_id):
        # its own, never another run's
        assert seen(run)["read_back"] == run["task_id"]
        (file,) = (a for a in run["artifacts"] if a["type"] == "file")
        assert file["path"] == "answer.md"
        assert file["content_hash"] == "sha256:" + hashlib.sha256(run["task_id"].encode()).hexdigest()
        assert not run["warnings"], run["warnings"]


def test_parallel_runs_of_a_cli_agent_each_work_in_a_folder_of_their_own(tmp_path: Path) -> None:
    project(tmp_path, "")

    result = atp(tmp_path, "--parallel=6", "--keep-workspaces")

    assert result.returncode == 0, result.stdout + result.stderr
    runs = runs_of(tmp_path)
    assert_each_run_had_its_own_file(runs)
    directory = run_dir(tmp_path)
    for run in runs:
        folder = directory / workspace_path("answer", run["run_number"])
        # the run's folder: the agent's working folder and context.workspace_path, kept as the
        # agent left it (--keep-workspaces), answer.md holding that run's task_id
        assert seen(run)["cwd"] == seen(run)["workspace_path"] == str(folder)
        assert (folder / "answer.md").read_text() == run["task_id"]
        assert seen(run)["agent_dir"] == str(tmp_path / "agent")  # ATP_AGENT_DIR: its own folder
    assert not (tmp_path / "agent" / "answer.md").exists()  # nothing in the agent's own folder


def test_an_argument_after_the_script_stays_in_the_runs_folder(tmp_path: Path) -> None:
    """Only what starts the agent is resolved against its folder: ``--out answer.md`` after the
    script stays relative, though the agent's folder has an answer.md left from an earlier run."""
    suite = project(tmp_path, "")
    suite.write_text(suite.read_text().replace("answer_file.py]", "answer_file.py, --out, answer.md]"))
    (tmp_path / "agent" / "answer.md").write_text("left over")

    result = atp(tmp_path, "--parallel=6")

    assert result.returncode == 0, result.stdout + result.stderr
    assert_each_run_had_its_own_file(runs_of(tmp_path))
    assert (tmp_path / "agent" / "answer.md").read_text() == "left over"


def test_an_agent_that_ends_without_a_response_is_told_of_its_runs_folder(tmp_path: Path) -> None:
    """An agent that opens a file beside it by a relative path fails in the run's folder: the
    reason says where it ran, where its cwd is (ATP_AGENT_DIR) and how to keep the old way; not
    when the agent says ``working_folder`` itself."""
    (tmp_path / "agent").mkdir()
    write(tmp_path / "agent" / "prompt.txt", "hello")
    write(tmp_path / "agent" / "agent.py", "open('prompt.txt').read()\n")
    head = (
        "test_suite: folders\nagents:\n  - name: agent\n    type: cli\n"
        f"    command: [{PYTHON!r}, agent.py, --model, gpt-4.1]\n    cwd: agent\n"
    )
    tests = "tests:\n  - id: t\n    task: {description: d}\n"
    write(tmp_path / "suite.yaml", head + tests)

    result = atp(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    (run,) = runs_of(tmp_path)
    says(run["error"], "without writing a response", "prompt.txt")
    says(run["error"], "context.workspace_path", tmp_path / "agent", "ATP_AGENT_DIR")
    says(run["error"], "working_folder: shared")
    says(result.stdout, "working_folder: shared")  # (the console's reason)

    shutil.rmtree(tmp_path / "runs")
    write(tmp_path / "suite.yaml", head + "    working_folder: per-run\n" + tests)
    result = atp(tmp_path)
    (run,) = runs_of(tmp_path)
    says(run["error"], "without writing a response", "prompt.txt")
    assert "working_folder" not in run["error"]


def test_passed_runs_folders_are_removed_and_failed_runs_folders_kept(tmp_path: Path) -> None:
    failing = "  - id: wrong\n    runs_per_test: 2\n    task: {description: d}\n    assertions:\n" \
        "      - {type: contains, config: {path: answer.md, pattern: not-there}}\n"  # fmt: skip
    project(tmp_path, "", PASSING + failing)

    result = atp(tmp_path, "--parallel=6")

    assert result.returncode == 1, result.stdout + result.stderr
    runs = runs_of(tmp_path)
    outcomes = {(r["test_id"], r["outcome"]) for r in runs}
    assert outcomes == {("answer", "passed"), ("wrong", "failed")}
    assert kept(tmp_path) == [
        Path(workspace_path("wrong", 1)).name,
        Path(workspace_path("wrong", 2)).name,
    ]
    for run in runs:
        if run["test_id"] == "wrong":
            folder = run_dir(tmp_path) / workspace_path("wrong", run["run_number"])
            assert (folder / "answer.md").read_text() == run["task_id"]


def test_a_persistent_agent_writes_each_run_in_its_context_workspace_path(tmp_path: Path) -> None:
    suite = project(tmp_path, "    persistent: true\n")
    suite.write_text(suite.read_text().replace("answer_file.py]", "answer_file.py, --in-workspace]"))

    result = atp(tmp_path, "--parallel=6")

    assert result.returncode == 0, result.stdout + result.stderr
    runs = runs_of(tmp_path)
    assert_each_run_had_its_own_file(runs)
    for run in runs:  # the process stays in its cwd; the run's folder is context.workspace_path
        assert seen(run)["cwd"] == str(tmp_path / "agent")
        folder = run_dir(tmp_path) / workspace_path("answer", run["run_number"])
        assert seen(run)["workspace_path"] == str(folder)
    assert kept(tmp_path) == []  # every run passed: their folders are gone


def test_a_persistent_agent_writing_in_its_cwd_is_told_where_to_write(tmp_path: Path) -> None:
    project(tmp_path, "    persistent: true\n")

    result = atp(tmp_path, "--runs=1")

    assert result.returncode == 1, result.stdout + result.stderr
    (run,) = runs_of(tmp_path)
    assert run["outcome"] == "failed"
    (check,) = run["checks"]
    says(check["message"], "answer.md", "context.workspace_path", tmp_path / "agent")


def test_working_folder_shared_runs_every_run_in_cwd_as_before(tmp_path: Path) -> None:
    project(tmp_path, "    working_folder: shared\n")

    result = atp(tmp_path, "--runs=3")

    assert result.returncode == 0, result.stdout + result.stderr
    runs = runs_of(tmp_path)
    assert [r["outcome"] for r in runs] == ["passed"] * 3
    for run in runs:
        assert seen(run)["cwd"] == str(tmp_path / "agent") and seen(run)["workspace_path"] is None
    # one folder for all: the file left is one run's, written over by the next
    assert (tmp_path / "agent" / "answer.md").read_text() in {r["task_id"] for r in runs}
    assert kept(tmp_path) == []


def test_a_relative_program_path_starts_from_the_agents_folder(tmp_path: Path) -> None:
    suite = project(tmp_path, "")
    script = tmp_path / "agent" / "answer_file.py"
    script.write_text(f"#!{PYTHON}\n" + script.read_text())
    script.chmod(0o755)
    suite.write_text(suite.read_text().replace(f"[{PYTHON!r}, answer_file.py]", "./answer_file.py"))

    result = atp(tmp_path, "--parallel=6")

    assert result.returncode == 0, result.stdout + result.stderr
    assert_each_run_had_its_own_file(runs_of(tmp_path))


def test_parallel_runs_of_a_container_agent_each_work_in_a_folder_of_their_own(tmp_path: Path) -> None:
    from tests.containers import agents_folder, busybox_image, engine, python, python_mounts

    client = engine()
    try:
        image = busybox_image(client)
    finally:
        client.close()
    mounts = [*python_mounts(), f"{agents_folder()}:/agents"]
    write(
        tmp_path / "suite.yaml",
        "test_suite: folders\nagents:\n  - name: boxed\n    type: container\n"
        f"    image: {image}\n    command: [{python()!r}, /agents/answer_file.py]\n"
        f"    readonly_mounts: {json.dumps(mounts)}\n    pull: never\n    grace_seconds: 1\n"
        f"defaults: {{runs_per_test: 10}}\ntests:\n{PASSING}",
    )

    result = atp(tmp_path, "--parallel=6")

    assert result.returncode == 0, result.stdout + result.stderr
    runs = runs_of(tmp_path)
    assert_each_run_had_its_own_file(runs)
    for run in runs:  # mounted at the same path, the container's working folder
        assert seen(run)["cwd"] == seen(run)["workspace_path"]
        assert seen(run)["cwd"] == str(run_dir(tmp_path) / workspace_path("answer", run["run_number"]))


def test_a_container_with_a_shared_workspace_and_per_run_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    write(
        tmp_path / "suite.yaml",
        "test_suite: s\nagents:\n  - name: boxed\n    type: container\n    image: x\n"
        f"    working_folder: per-run\n    workspace: work\ntests:\n{PASSING}",
    )
    result = atp(tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    says(result.stderr, "working_folder", "workspace", "shared")
