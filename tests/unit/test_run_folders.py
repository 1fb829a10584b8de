"""A folder of its own for every run: the command resolved before the move to it, the setting
that keeps the old behaviour, and what is kept or removed after the run (never following what
the agent left)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from atp.adapters.cli import CliAdapter, CliSettings, resolve_argv
from atp.adapters.container import ContainerAdapter, ContainerSettings
from atp.core.attempt import make_folder, tidy_folder
from atp.core.protocol import ATPRequest, Context, Task


def request(workspace: Path | None) -> ATPRequest:
    context = Context(workspace_path=str(workspace)) if workspace is not None else None
    return ATPRequest(version="1.0", task_id="t", task=Task(description="d"), context=context)


def test_only_what_starts_the_agent_is_resolved_against_cwd(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    (tmp_path / "answer.md").write_text("left over")
    (tmp_path / "bin").mkdir()
    (tmp_path / "conf").mkdir()
    agent, answer = str(tmp_path / "agent.py"), str(tmp_path / "answer.md")
    # the script: the first argument naming a file there (not options, not a folder), no later one
    assert resolve_argv("python3 -u -X dev conf agent.py --out answer.md", tmp_path) == [
        "python3", "-u", "-X", "dev", "conf", agent, "--out", "answer.md",
    ]  # fmt: skip
    assert resolve_argv(["node", "agent.py"], tmp_path, ["answer.md"]) == ["node", agent, "answer.md"]
    assert resolve_argv("bin/run answer.md", tmp_path) == [str(tmp_path / "bin/run"), answer]
    assert resolve_argv("./agent.py --model gpt-4.1", tmp_path) == [
        str(tmp_path / "agent.py"),
        "--model",
        "gpt-4.1",
    ]
    # a module or code: nothing from there on is a script
    assert resolve_argv("python3 -m agent answer.md", tmp_path) == ["python3", "-m", "agent", "answer.md"]
    assert resolve_argv("python3 -c pass agent.py", tmp_path) == ["python3", "-c", "pass", "agent.py"]
    assert resolve_argv("python3 missing.py answer.md", tmp_path) == ["python3", "missing.py", answer]


def test_a_cli_agent_runs_in_the_runs_folder_unless_shared(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    run = tmp_path / "runs" / "workspaces" / "t.1"
    own = CliAdapter(CliSettings(command=["python3", "agent.py"]), name="a", base_dir=tmp_path)
    assert own.folder_per_run and own.argv == ["python3", str(tmp_path / "agent.py")]
    assert own.working_folder(request(run)) == run
    assert own.working_folder(request(None)) == tmp_path  # (no folder given: its cwd)
    shared = CliAdapter(
        CliSettings(command=["python3", "agent.py"], working_folder="shared"), name="a", base_dir=tmp_path
    )
    # one way to resolve the command, whatever the folder
    assert not shared.folder_per_run and shared.argv == own.argv
    assert shared.working_folder(request(run)) == tmp_path
    # the agent's own folder, wherever it runs; ATP's value, over an inherited or set one
    own_env = CliAdapter(
        CliSettings(command="a", env={"ATP_AGENT_DIR": "x"}, inherit_env=False), name="a", base_dir=tmp_path
    ).env
    assert own_env == {"ATP_AGENT_DIR": str(tmp_path)} == {"ATP_AGENT_DIR": shared.env["ATP_AGENT_DIR"]}
    with pytest.raises(msgspec.ValidationError, match="working_folder"):
        msgspec.convert({"command": "a", "working_folder": "own"}, CliSettings)


def test_a_container_shares_its_workspace_setting_and_refuses_both(tmp_path: Path) -> None:
    assert ContainerAdapter(ContainerSettings(image="i"), name="a", base_dir=tmp_path).folder_per_run
    with_workspace = ContainerSettings(image="i", workspace="work")
    assert not ContainerAdapter(with_workspace, name="a", base_dir=tmp_path).folder_per_run
    shared = ContainerSettings(image="i", working_folder="shared")
    assert not ContainerAdapter(shared, name="a", base_dir=tmp_path).folder_per_run
    with pytest.raises(ValueError, match="working_folder: shared"):
        ContainerSettings(image="i", workspace="work", working_folder="per-run")


def test_a_kept_folder_stays_unless_empty_and_a_removed_one_goes_whole(tmp_path: Path) -> None:
    folder = tmp_path / "t.1"
    make_folder(folder)
    assert tidy_folder(folder, keep=True) == (False, None) and not folder.exists()  # empty: gone
    make_folder(folder)
    (folder / "deep" / "er").mkdir(parents=True)
    (folder / "deep" / "er" / "answer.md").write_text("x")
    assert tidy_folder(folder, keep=True) == (True, None)
    assert (folder / "deep" / "er" / "answer.md").read_text() == "x"
    assert tidy_folder(folder, keep=False) == (False, None) and not folder.exists()
    assert tidy_folder(folder, keep=False) == (False, None)  # (already gone)


def test_what_the_agent_put_in_its_folders_place_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    folder = tmp_path / "t.1"
    make_folder(folder)
    (folder / "link").symlink_to(outside)
    assert tidy_folder(folder, keep=False) == (False, None)
    assert (outside / "precious.txt").read_text() == "keep me"
    folder.symlink_to(outside)  # the folder itself replaced by a link out
    assert tidy_folder(folder, keep=False) == (False, None)
    assert not os.path.lexists(folder) and (outside / "precious.txt").read_text() == "keep me"
    folder.symlink_to(outside)
    make_folder(folder, replace=True)  # a new attempt: the link goes, a fresh folder comes
    assert folder.is_dir() and not folder.is_symlink() and list(folder.iterdir()) == []
    assert (outside / "precious.txt").read_text() == "keep me"
